//! Reading a request target: its path and query (origin- or absolute-form), and one
//! form-encoded query parameter.

use percent_encoding::percent_decode;

/// Splits a request target into path and query, accepting absolute-form
/// (`http://host/path?q`) as well as origin-form (`/path?q`).
pub(super) fn split_target(target: &str) -> (&str, &str) {
    let mut t = target;
    if let Some(rest) = t
        .strip_prefix("http://")
        .or_else(|| t.strip_prefix("https://"))
    {
        t = rest.find('/').map_or("/", |i| &rest[i..]);
    }
    let t = t.split('#').next().unwrap_or("");
    match t.split_once('?') {
        Some((p, q)) => (p, q),
        None => (t, ""),
    }
}

/// Finds the first `name` parameter in an `application/x-www-form-urlencoded` query and
/// decodes it (`+` is a space, `%XX` a byte). `Err` when the value is not UTF-8.
pub(super) fn query_param(query: &str, name: &str) -> Option<std::result::Result<String, ()>> {
    query.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        if form_decode(k).ok()? != name {
            return None;
        }
        Some(form_decode(v))
    })
}

/// Decodes one form-encoded name or value; `Err` when it is not UTF-8.
fn form_decode(s: &str) -> std::result::Result<String, ()> {
    let plus = s.replace('+', " ");
    let bytes: Vec<u8> = percent_decode(plus.as_bytes()).collect();
    String::from_utf8(bytes).map_err(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_queries() {
        assert_eq!(split_target("/a?b=c"), ("/a", "b=c"));
        assert_eq!(split_target("http://h:1/a?b"), ("/a", "b"));
        assert_eq!(split_target("http://h:1"), ("/", ""));
        assert_eq!(
            query_param("x=1&key=host%20name%3A1+2&key=z", "key"),
            Some(Ok("host name:1 2".to_string()))
        );
        assert_eq!(query_param("key", "key"), Some(Ok(String::new())));
        assert_eq!(query_param("a=b", "key"), None);
    }
}
