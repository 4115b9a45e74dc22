//! `neardup serve` end to end over HTTP: every route, concurrent clients, each kind of bad
//! request answered with a JSON 4xx while the service carries on, the bearer token, and
//! SIGTERM with a request in flight.

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::thread;
use std::time::Duration;

use common::serve::*;
use common::{neardup, s};
use serde_json::Value;

/// A page of `n` words, from a small vocabulary, that differs with `seed`.
fn page(seed: u64, n: usize) -> String {
    let mut rng = common::SeededRng::new(seed);
    rng.words(n).join(" ")
}

fn put(server: &Server, id: &str, text: &str) -> Value {
    let r = server.request(
        "PUT",
        &format!("/v1/documents/{id}"),
        Some(&format!("{{\"text\": {}}}", quoted(text))),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()
}

fn error_of(r: &Response, status: u16) -> String {
    assert_eq!(r.status, status, "{}", r.text());
    assert!(
        r.header("content-type")
            .is_some_and(|c| c.starts_with("application/json")),
        "{:?}",
        r.headers
    );
    r.json()["error"]
        .as_str()
        .expect("an error message")
        .to_string()
}

#[test]
fn every_route_answers_and_every_bad_request_gets_a_json_error() {
    let dir = tempfile::tempdir().unwrap();
    let index = dir.path().join("idx");
    let server = Server::start(
        &index,
        &["--create", "--max-body", "20000", "--request-timeout", "1"],
    );
    assert_eq!(
        server.request("GET", "/healthz", None).json()["status"],
        "ok"
    );

    let text = page(1, 300);
    let a = put(&server, "a", &text);
    assert_eq!(a["status"], "new", "{a}");
    assert_eq!(a["cluster_id"], Value::Null);
    // The same words in another case and spacing: an exact duplicate.
    let b = put(&server, "b", &text.to_uppercase().replace(' ', "  "));
    assert_eq!(b["status"], "exact", "{b}");
    assert_eq!(b["matches"][0]["id"], "a");
    assert_eq!(b["matches"][0]["exact"], true);
    assert_eq!(b["cluster_id"], a["doc_id"]);
    assert_eq!(b["cluster_size"], 2);
    // One word changed in 300: a near duplicate.
    let mut words: Vec<&str> = text.split(' ').collect();
    words[150] = "zebra";
    let near = words.join(" ");
    let c = put(&server, "c", &near);
    assert_eq!(c["status"], "near", "{c}");
    assert_eq!(c["cluster_size"], 3);
    let unrelated = put(&server, "d", &page(2, 300));
    assert_eq!(unrelated["status"], "new");
    assert_eq!(put(&server, "e", "  ...  ")["status"], "empty");

    let got = server.request("GET", "/v1/documents/c", None).json();
    assert_eq!(got["cluster_size"], 3);
    let neighbours: Vec<&str> = got["neighbours"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["id"].as_str().unwrap())
        .collect();
    assert_eq!(neighbours, ["a", "b"]);

    // Queries: a text, and a batch of fingerprints with a smaller k.
    let q = server
        .request(
            "POST",
            "/v1/query",
            Some(&format!("{{\"text\": {}}}", quoted(&near))),
        )
        .json();
    let ids: Vec<&str> = q["results"][0]["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["a", "b", "c"], "{q}");
    let fp = a["fingerprint"].as_str().unwrap();
    let q = server
        .request(
            "POST",
            "/v1/query",
            Some(&format!(
                "{{\"fingerprints\": [\"{fp}\", \"0123456789abcdef\"], \"k\": 0}}"
            )),
        )
        .json();
    assert_eq!(q["k"], 0);
    assert_eq!(q["results"][0]["matches"].as_array().unwrap().len(), 2);
    assert_eq!(q["results"][1]["matches"].as_array().unwrap().len(), 0);

    // Delete: the cluster loses a member; a second delete finds nothing.
    let r = server.request("DELETE", "/v1/documents/b", None);
    assert_eq!(r.json()["deleted"], true);
    error_of(&server.request("DELETE", "/v1/documents/b", None), 404);
    error_of(&server.request("GET", "/v1/documents/b", None), 404);
    assert_eq!(
        server.request("GET", "/v1/documents/a", None).json()["cluster_size"],
        2
    );

    let stats = server.request("GET", "/v1/stats", None).json();
    assert_eq!(stats["documents"], 4, "{stats}");
    assert_eq!(stats["clusters"], 1);
    assert_eq!(stats["clustered_documents"], 2);
    let metrics = server.request("GET", "/metrics", None);
    assert_eq!(metrics.status, 200);
    let m = metrics.text();
    assert!(m.contains("neardup_documents 4\n"), "{m}");
    assert!(m.contains("neardup_clusters 1\n"), "{m}");
    assert!(
        m.contains(
            r#"neardup_http_requests_total{method="PUT",route="/v1/documents/{id}",status="200"} 5"#
        ),
        "{m}"
    );
    assert!(m.contains("neardup_http_request_duration_seconds_bucket{le=\"+Inf\"}"));

    let cp = server.request("POST", "/v1/checkpoint", None).json();
    assert!(cp["generation"].as_u64().is_some(), "{cp}");
    assert_eq!(cp["documents"], 4);

    // 400: broken JSON, an unknown field, a missing field, bad hex, a k above the index's.
    let bad = |method: &str, path: &str, body: &str| {
        error_of(&server.request(method, path, Some(body)), 400)
    };
    assert!(bad("PUT", "/v1/documents/x", "{\"text\": ").contains("JSON"));
    assert!(bad("PUT", "/v1/documents/x", "{\"text\": \"t\", \"colour\": 1}").contains("colour"));
    assert!(bad("PUT", "/v1/documents/x", "{\"url\": \"u\"}").contains("text"));
    assert!(bad("POST", "/v1/query", "{\"fingerprint\": \"xyz\"}").contains("16 hex digits"));
    assert!(bad("POST", "/v1/query", "{\"text\": \"t\", \"k\": 9}").contains("larger than"));
    assert!(bad("POST", "/v1/query", "{}").contains("nothing to query"));
    // 404 and 405.
    assert!(error_of(&server.request("GET", "/v2/nothing", None), 404).contains("/v2/nothing"));
    assert!(error_of(&server.request("DELETE", "/v1/stats", None), 405).contains("DELETE"));
    // 413: a body over --max-body.
    let big = format!("{{\"text\": {}}}", quoted(&page(3, 5000)));
    assert!(big.len() > 20000);
    error_of(&server.request("PUT", "/v1/documents/big", Some(&big)), 413);
    // 415: no JSON content type.
    let mut conn = server.conn();
    conn.send_raw(b"PUT /v1/documents/x HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: 13\r\n\r\n{\"text\":\"t\"}\n")
        .unwrap();
    error_of(&conn.read_response().unwrap(), 415);
    // 408: a body that stops arriving.
    let mut conn = server.conn();
    conn.send_raw(b"PUT /v1/documents/slow HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"text\": \"sl")
        .unwrap();
    assert!(error_of(&conn.read_response().unwrap(), 408).contains("did not arrive"));

    // None of it disturbed the service.
    error_of(&server.request("GET", "/v1/documents/slow", None), 404);
    error_of(&server.request("GET", "/v1/documents/x", None), 404);
    assert_eq!(
        server.request("GET", "/v1/stats", None).json()["documents"],
        4
    );
    assert_eq!(put(&server, "f", &page(4, 50))["status"], "new");
}

#[test]
fn concurrent_clients_all_get_their_answers_and_their_documents_stay() {
    let dir = tempfile::tempdir().unwrap();
    let index = dir.path().join("idx");
    let server = Server::start(&index, &["--create"]);
    let addr = server.addr;
    const CLIENTS: u64 = 6;
    const EACH: u64 = 40;
    let handles: Vec<_> = (0..CLIENTS)
        .map(|c| {
            thread::spawn(move || {
                let mut conn = Conn::connect(addr).unwrap();
                let mut fps = Vec::new();
                for n in 0..EACH {
                    let id = format!("c{c}-{n}");
                    let body = format!("{{\"text\": {}}}", quoted(&page(c * 1000 + n, 120)));
                    let r = conn
                        .request("PUT", &format!("/v1/documents/{id}"), Some(&body))
                        .unwrap();
                    assert_eq!(r.status, 200, "{}", r.text());
                    let fp = r.json()["fingerprint"].as_str().unwrap().to_string();
                    // Every client also reads while the others write.
                    let q = conn
                        .request(
                            "POST",
                            "/v1/query",
                            Some(&format!("{{\"fingerprint\": \"{fp}\"}}")),
                        )
                        .unwrap()
                        .json();
                    let found = q["results"][0]["matches"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .any(|m| m["id"] == id.as_str());
                    assert!(found, "{id} is not found right after its put: {q}");
                    fps.push((id, fp));
                }
                fps
            })
        })
        .collect();
    let written: Vec<(String, String)> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    assert_eq!(written.len() as u64, CLIENTS * EACH);
    let stats = server.request("GET", "/v1/stats", None).json();
    assert_eq!(stats["documents"], CLIENTS * EACH);
    // Group commit: fewer log syncs than writes is likely but not certain; never more.
    assert!(stats["batches"].as_u64().unwrap() <= CLIENTS * EACH);
    for (id, fp) in &written {
        let got = server
            .request("GET", &format!("/v1/documents/{id}"), None)
            .json();
        assert_eq!(got["fingerprint"], fp.as_str());
    }
}

/// Mode 600: a token file others may read is refused.
fn private(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

fn token_server(dir: &Path, token: &str) -> Server {
    let token_file = dir.join("token");
    std::fs::write(&token_file, format!("{token}\n")).unwrap();
    private(&token_file);
    Server::start(
        &dir.join("idx"),
        &["--create", "--token-file", s(&token_file)],
    )
}

#[test]
fn a_token_protected_listener_refuses_a_missing_or_wrong_token() {
    let dir = tempfile::tempdir().unwrap();
    let token = "correct-horse-battery-staple";
    let server = token_server(dir.path(), token);
    let addr: SocketAddr = server.addr;
    let with = |token: Option<&str>, method: &str, path: &str, body: Option<&str>| {
        let mut conn = Conn::connect(addr).unwrap();
        conn.token = token.map(str::to_string);
        conn.request(method, path, body).unwrap()
    };
    for token in [
        None,
        Some("wrong"),
        Some("correct-horse-battery-stapl"),
        Some("correct-horse-battery-staplee"),
    ] {
        for (method, path, body) in [
            ("GET", "/v1/stats", None),
            ("PUT", "/v1/documents/x", Some("{\"text\": \"t\"}")),
            ("POST", "/v1/query", Some("{\"text\": \"t\"}")),
            ("GET", "/metrics", None),
        ] {
            let r = with(token, method, path, body);
            assert!(
                error_of(&r, 401).contains("bearer token"),
                "{token:?} {path}"
            );
            assert_eq!(r.header("www-authenticate"), Some("Bearer"));
        }
    }
    // Nothing was written; the right token works; /healthz needs none.
    let r = with(Some(token), "GET", "/v1/stats", None);
    assert_eq!(r.json()["documents"], 0);
    let r = with(
        Some(token),
        "PUT",
        "/v1/documents/x",
        Some("{\"text\": \"t\"}"),
    );
    assert_eq!(r.json()["status"], "new");
    assert_eq!(with(None, "GET", "/healthz", None).status, 200);

    // Beyond loopback a token is required, and a short token is refused.
    let out = neardup()
        .args(["serve", "--index", s(&dir.path().join("other")), "--create"])
        .args(["--listen", "0.0.0.0:0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("needs --token-file"));
    std::fs::write(dir.path().join("short"), "abc").unwrap();
    private(&dir.path().join("short"));
    let out = neardup()
        .args(["serve", "--index", s(&dir.path().join("other")), "--create"])
        .args(["--token-file", s(&dir.path().join("short"))])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("at least 16 characters"));
}

#[test]
fn sigterm_answers_the_request_in_flight_then_stops_with_its_write_kept() {
    let dir = tempfile::tempdir().unwrap();
    let index = dir.path().join("idx");
    let mut server = Server::start(&index, &["--create", "--request-timeout", "30"]);
    put(&server, "before", &page(5, 80));
    // A put whose body is half sent when SIGTERM comes.
    let body = format!("{{\"text\": {}}}", quoted(&page(6, 80)));
    let (first, rest) = body.split_at(body.len() / 2);
    let mut conn = server.conn();
    conn.send_raw(
        format!(
            "PUT /v1/documents/inflight HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{first}",
            body.len()
        )
        .as_bytes(),
    )
    .unwrap();
    thread::sleep(Duration::from_millis(300));
    server.proc.signal("TERM");
    thread::sleep(Duration::from_millis(300));
    // No new connections are taken once draining...
    assert!(
        server.proc.poll().is_none(),
        "it waits for the request in flight"
    );
    conn.send_raw(rest.as_bytes()).unwrap();
    // ...but the one in flight is answered.
    let r = conn.read_response().unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["status"], "new");
    let status = server.proc.wait(Duration::from_secs(30)).expect("it stops");
    assert!(status.success(), "{}", server.proc.log());
    assert!(
        server.proc.stderr().contains("SIGTERM"),
        "{}",
        server.proc.log()
    );
    // Both writes are there after a restart.
    let again = Server::start(&index, &[]);
    for id in ["before", "inflight"] {
        assert_eq!(
            again
                .request("GET", &format!("/v1/documents/{id}"), None)
                .status,
            200
        );
    }
}

/// Issue 39, case 3: `neardup serve` verifies the index's checksums on start: a flipped
/// byte of `docs.bin` (a wrong fingerprint) or of a table's last row (a row past the
/// documents) is refused naming the file, rc 1, instead of being served (and carried into
/// the next checkpoint with new checksums) or panicking.
#[test]
fn a_damaged_index_is_refused_on_start_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("corpus.jsonl");
    let lines: Vec<String> = (0..20)
        .map(|i| {
            format!(
                "{{\"id\": \"base-{i}\", \"text\": {}}}",
                quoted(&page(i, 200))
            )
        })
        .collect();
    std::fs::write(&input, lines.join("\n") + "\n").unwrap();
    let index = dir.path().join("idx");
    let out = neardup()
        .args([
            "run",
            "--index",
            s(&index),
            "--output",
            s(&dir.path().join("out")),
        ])
        .arg(&input)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let refused = |file: &str, at: usize| {
        let path = index.join("gen-00000").join(file);
        let original = std::fs::read(&path).unwrap();
        let mut damaged = original.clone();
        damaged[at] ^= 0x80;
        std::fs::write(&path, &damaged).unwrap();
        let mut cmd = std::process::Command::new(common::BIN);
        cmd.args(["serve", "--index", s(&index), "--listen", "127.0.0.1:0"]);
        let mut proc = common::Proc::spawn("neardup serve", cmd);
        let status = proc.wait(Duration::from_secs(60));
        let stderr = proc.stderr();
        assert_eq!(status.and_then(|s| s.code()), Some(1), "{}", proc.log());
        let needle = format!("gen-00000/{file}: damaged index: checksum");
        assert!(stderr.contains(&needle), "{stderr}");
        std::fs::write(&path, &original).unwrap();
    };
    // Row 5's simhash in docs.bin: after the header and the 20 doc numbers.
    refused("docs.bin", 64 + 8 * 20 + 8 * 5);
    let table = std::fs::metadata(index.join("gen-00000").join("table-000.bin")).unwrap();
    refused("table-000.bin", table.len() as usize - 1);
    // Restored, it serves, and records what it checked whole (issue 36: a restart over
    // unchanged files does not read them again).
    let server = Server::start(&index, &[]);
    assert_eq!(
        server.request("GET", "/v1/documents/base-5", None).status,
        200
    );
    drop(server);
    let record = std::fs::read_to_string(index.join("verified.json")).unwrap();
    assert!(record.contains("\"gen-00000/table-000.bin\""), "{record}");
    // A file changed after it was recorded is read again, and refused.
    refused("table-000.bin", 100);
}
