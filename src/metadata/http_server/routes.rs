//! Routing a request: `/health`, and `/metadata` by method to one key's answer or (a
//! `GET` with `prefix` and no `key`) a listing; anything else 404.

use super::answers::{delete_key, get_key, list_prefix, put_key};
use super::preconditions::Preconditions;
use super::query::{query_param, split_target};
use super::table::MetadataTable;
use crate::runtime::http_server::{HeadedReply, HttpReply};

/// Routes one request against `table`: `method` is the HTTP method as sent, `target` the
/// request target (`/metadata?key=...`, or absolute-form), `body` the request body. The
/// request has no header fields, so no precondition, and the reply's `ETag` is dropped.
pub fn handle_request(table: &MetadataTable, method: &str, target: &str, body: &[u8]) -> HttpReply {
    handle_request_with_headers(table, method, target, &[], body).reply
}

/// Routes one request with its header fields against `table` (see
/// [the server's documentation](crate::metadata::http_server) for the routes, the
/// versions and the preconditions).
pub fn handle_request_with_headers(
    table: &MetadataTable,
    method: &str,
    target: &str,
    headers: &[(String, String)],
    body: &[u8],
) -> HeadedReply {
    let (path, query) = split_target(target);
    match path {
        "/health" if method == "GET" => HttpReply::text(200, "OK").into(),
        "/health" => HttpReply::text(405, "Method not allowed").into(),
        "/metadata" => metadata_route(table, method, query, headers, body),
        _ => HttpReply::text(404, "Not found").into(),
    }
}

/// `/metadata`: one key by `key`, or (GET without `key`) a listing by `prefix`.
fn metadata_route(
    table: &MetadataTable,
    method: &str,
    query: &str,
    headers: &[(String, String)],
    body: &[u8],
) -> HeadedReply {
    if !matches!(method, "GET" | "PUT" | "DELETE") {
        return HttpReply::text(405, "Method not allowed").into();
    }
    let key = match query_param(query, "key") {
        Some(Ok(k)) if !k.is_empty() => k,
        Some(Err(())) => return HttpReply::text(400, "Invalid key parameter").into(),
        None if method == "GET" => match query_param(query, "prefix") {
            Some(Ok(prefix)) => return list_prefix(table, &prefix).into(),
            Some(Err(())) => return HttpReply::text(400, "Invalid prefix parameter").into(),
            None => return HttpReply::text(400, "Missing key parameter").into(),
        },
        _ => return HttpReply::text(400, "Missing key parameter").into(),
    };
    let pre = Preconditions::from_headers(headers);
    match method {
        "GET" => get_key(table, &key),
        "PUT" => put_key(table, &key, body, &pre),
        _ => delete_key(table, &key, &pre),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;
    use crate::codec::base64;

    fn t() -> MetadataTable {
        MetadataTable::new()
    }

    #[test]
    fn routes_and_semantics() {
        let tb = t();
        let k = "/metadata?key=mooncake%2Frpc_meta%2F127.0.0.1%3A12345";
        assert_eq!(handle_request(&tb, "GET", k, b"").status, 404);
        assert_eq!(handle_request(&tb, "PUT", k, b"{\"a\":1}").status, 200);
        assert_eq!(
            tb.get("mooncake/rpc_meta/127.0.0.1:12345").as_deref(),
            Some(&b"{\"a\":1}"[..])
        );
        let r = handle_request(&tb, "PUT", k, b"{\"a\":1}");
        assert_eq!(
            (r.status, r.body.as_slice()),
            (200, &b"metadata unchanged"[..])
        );
        let r = handle_request(&tb, "PUT", k, b"{\"a\":2}");
        assert_eq!(
            (r.status, r.body.as_slice()),
            (400, &b"Duplicate rpc_meta key not allowed"[..])
        );
        let r = handle_request(&tb, "GET", k, b"");
        assert_eq!((r.status, r.body.as_slice()), (200, &b"{\"a\":1}"[..]));
        assert_eq!(r.content_type, "application/json");
        assert_eq!(handle_request(&tb, "DELETE", k, b"").status, 200);
        assert_eq!(handle_request(&tb, "DELETE", k, b"").status, 404);
        // Non-rpc_meta keys overwrite freely.
        let r = "/metadata?key=mooncake%2Fram%2Fx";
        assert_eq!(handle_request(&tb, "PUT", r, b"1").status, 200);
        assert_eq!(handle_request(&tb, "PUT", r, b"2").status, 200);
        assert_eq!(tb.get("mooncake/ram/x").as_deref(), Some(&b"2"[..]));
    }

    #[test]
    fn errors() {
        let tb = t();
        for (method, target, status) in [
            ("GET", "/metadata", 400),
            ("GET", "/metadata?key=", 400),
            ("GET", "/metadata?x=1", 400),
            ("GET", "/metadata?key=%FF", 400),
            ("POST", "/metadata?key=a", 405),
            ("GET", "/other?key=a", 404),
            ("GET", "/metadata/?key=a", 404),
            ("GET", "/health", 200),
            ("GET", "*", 404),
        ] {
            let got = handle_request(&tb, method, target, b"").status;
            assert_eq!(got, status, "{method} {target}");
        }
    }

    fn h(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    }

    fn call(
        tb: &MetadataTable,
        method: &str,
        target: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> HeadedReply {
        handle_request_with_headers(tb, method, target, &h(headers), body)
    }

    fn etag(reply: &HeadedReply) -> Option<&str> {
        reply
            .headers
            .iter()
            .find(|(n, _)| *n == "ETag")
            .map(|(_, v)| v.as_str())
    }

    #[test]
    fn the_plain_protocol_is_unchanged_and_gets_etags() {
        let tb = t();
        let k = "/metadata?key=mooncake%2Fram%2Fx";
        for (method, body, status, text) in [
            ("GET", &b""[..], 404, &b"metadata not found"[..]),
            ("PUT", b"v1", 200, b"metadata updated"),
            ("GET", b"", 200, b"v1"),
            ("PUT", b"v2", 200, b"metadata updated"),
            ("DELETE", b"", 200, b"metadata deleted"),
            ("DELETE", b"", 404, b"metadata not found"),
        ] {
            // Without headers (as upstream's clients send) and through the plain entry.
            let r = call(&tb, method, k, &[("Host", "x")], body);
            assert_eq!(
                (r.reply.status, r.reply.body.as_slice()),
                (status, text),
                "{method}"
            );
            if method == "GET" && status == 200 {
                assert_eq!(r.reply.content_type, "application/json");
            }
            assert_eq!(etag(&r).is_some(), status == 200, "{method}");
            if method == "PUT" {
                // The plain entry answers the same.
                let plain = handle_request(&tb, method, k, body);
                assert_eq!((plain.status, plain.body.as_slice()), (status, text));
            }
        }
        // A prefix is no key to a PUT or DELETE.
        assert_eq!(
            handle_request(&tb, "PUT", "/metadata?prefix=a", b"x").status,
            400
        );
        assert_eq!(
            handle_request(&tb, "DELETE", "/metadata?prefix=a", b"").status,
            400
        );
        assert_eq!(
            handle_request(&tb, "GET", "/metadata?key=&prefix=a", b"").status,
            400
        );
    }

    #[test]
    fn versions_come_from_one_counter_and_show_in_etags() {
        let tb = t();
        let a = call(&tb, "PUT", "/metadata?key=a", &[], b"1");
        let b = call(&tb, "PUT", "/metadata?key=b", &[], b"2");
        assert_eq!((etag(&a), etag(&b)), (Some("\"1\""), Some("\"2\"")));
        assert_eq!(
            etag(&call(&tb, "GET", "/metadata?key=a", &[], b"")),
            Some("\"1\"")
        );
        call(&tb, "DELETE", "/metadata?key=a", &[], b"");
        let again = call(&tb, "PUT", "/metadata?key=a", &[], b"3");
        assert_eq!(
            etag(&again),
            Some("\"3\""),
            "a re-created key's version still grows"
        );
        assert_eq!(tb.get_versioned("a").unwrap().version, 3);
        // rpc_meta's identical re-put is no write: same version.
        let m = "/metadata?key=x%2Frpc_meta%2Fy";
        let first = call(&tb, "PUT", m, &[], b"m");
        let same = call(&tb, "PUT", m, &[], b"m");
        assert_eq!(same.reply.body, b"metadata unchanged");
        assert_eq!(etag(&first), etag(&same));
    }

    #[test]
    fn preconditions_answer_412() {
        let tb = t();
        let k = "/metadata?key=k";
        let create = [("If-None-Match", "*")];
        assert_eq!(call(&tb, "PUT", k, &create, b"a").reply.status, 200);
        let r = call(&tb, "PUT", k, &create, b"b");
        assert_eq!(
            (r.reply.status, r.reply.body.as_slice()),
            (412, &b"Precondition Failed"[..])
        );
        assert_eq!(tb.get("k").unwrap(), b"a");
        let v = tb.get_versioned("k").unwrap().version;
        let now = format!("\"{v}\"");
        let stale = format!("\"{}\"", v + 7);
        for (method, tag, status) in [
            ("PUT", stale.as_str(), 412),
            ("DELETE", stale.as_str(), 412),
            ("PUT", "W/\"1\"", 412),
            ("PUT", "1", 412),
            ("PUT", "garbage", 412),
            ("PUT", now.as_str(), 200),
            // The version moved on.
            ("PUT", now.as_str(), 412),
            ("DELETE", now.as_str(), 412),
        ] {
            let r = call(&tb, method, k, &[("if-match", tag)], b"c");
            assert_eq!(r.reply.status, status, "{method} If-Match {tag}");
        }
        let v2 = tb.get_versioned("k").unwrap().version;
        assert!(v2 > v);
        // The status of `method` on `k` with one header.
        let status = |method: &str, header: (&str, &str), body: &[u8]| {
            call(&tb, method, k, &[header], body).reply.status
        };
        // A list of tags, one of them current; then `*`.
        let list = format!("\"{v}\", \"{v2}\"");
        assert_eq!(status("PUT", ("If-Match", &list), b"d"), 200);
        assert_eq!(status("DELETE", ("If-Match", "*"), b""), 200);
        // Gone: If-Match fails with 412, not 404; If-None-Match creates.
        assert_eq!(status("DELETE", ("If-Match", "*"), b""), 412);
        assert_eq!(status("PUT", ("If-Match", &now), b"e"), 412);
        assert_eq!(tb.get("k"), None);
        assert_eq!(call(&tb, "DELETE", k, &[], b"").reply.status, 404);
        // GET ignores preconditions.
        call(&tb, "PUT", k, &[], b"f");
        assert_eq!(status("GET", ("If-Match", "\"0\""), b""), 200);
        assert_eq!(status("GET", ("If-None-Match", "*"), b""), 200);
    }

    #[test]
    fn lists_by_prefix_in_key_order() {
        let tb = t();
        for key in ["p/b", "p/a", "q/a", "p", "p/a/x"] {
            tb.put(key, key.as_bytes().to_vec());
        }
        tb.put("p/bin", vec![0, 255]);
        let list = |target: &str| -> Vec<Value> {
            let r = call(&tb, "GET", target, &[], b"");
            assert_eq!(r.reply.status, 200, "{target}");
            assert_eq!(r.reply.content_type, "application/json");
            serde_json::from_slice::<Vec<Value>>(&r.reply.body).unwrap()
        };
        let got = list("/metadata?prefix=p%2F");
        let keys: Vec<&str> = got.iter().map(|e| e["key"].as_str().unwrap()).collect();
        assert_eq!(keys, ["p/a", "p/a/x", "p/b", "p/bin"]);
        assert_eq!(got[0]["value"], base64::encode(b"p/a"));
        assert_eq!(got[3]["value"], "AP8=");
        assert_eq!(got[3]["version"], 6);
        assert_eq!(got[0]["version"], tb.get_versioned("p/a").unwrap().version);
        assert_eq!(list("/metadata?prefix=").len(), 6);
        assert!(list("/metadata?prefix=zz").is_empty());
        assert_eq!(
            call(&tb, "GET", "/metadata?prefix=%FF", &[], b"")
                .reply
                .status,
            400
        );
    }
}
