//! What the HTTP server asks of its user: the [`HttpHandler`] trait and the replies it
//! returns ([`HttpReply`], and [`HeadedReply`] with extra header fields).

/// Answers requests: `method` as sent, `target` the request target (origin- or
/// absolute-form), `body` the request body.
pub trait HttpHandler: Send + Sync + 'static {
    /// Produces the reply to one request.
    fn handle(&self, method: &str, target: &str, body: &[u8]) -> HttpReply;

    /// Produces the reply to one request given its header fields (`headers`, names and
    /// values as sent, values trimmed), with extra response header fields; by default
    /// [`handle`](Self::handle), ignoring the request's headers and adding none.
    fn handle_with_headers(
        &self,
        method: &str,
        target: &str,
        headers: &[(String, String)],
        body: &[u8],
    ) -> HeadedReply {
        let _ = headers;
        HeadedReply::from(self.handle(method, target, body))
    }
}

/// A reply with header fields beyond the ones every reply has (`Content-Type`,
/// `Content-Length`, `Connection`); a field whose name or value holds CR or LF is not
/// sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeadedReply {
    /// The status, content type and body.
    pub reply: HttpReply,
    /// The extra header fields, in order.
    pub headers: Vec<(&'static str, String)>,
}

impl From<HttpReply> for HeadedReply {
    fn from(reply: HttpReply) -> Self {
        HeadedReply {
            reply,
            headers: Vec::new(),
        }
    }
}

/// A response produced by an [`HttpHandler`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpReply {
    /// HTTP status code.
    pub status: u16,
    /// `Content-Type` header value.
    pub content_type: &'static str,
    /// Response body.
    pub body: Vec<u8>,
}

impl HttpReply {
    /// A plain-text reply.
    pub fn text(status: u16, body: &str) -> Self {
        HttpReply {
            status,
            content_type: "text/plain; charset=utf-8",
            body: body.as_bytes().to_vec(),
        }
    }
}
