//! Small archives built in memory, for tests and examples: a WARC record, an ARC file,
//! gzip members. Real archives are in `../shared/corpora/web-archive-samples`.

use std::io::Write;

/// One WARC/1.0 record: the header fields a crawler writes, `block` as its content, and the
/// two line ends after it.
pub fn warc(kind: &str, uri: Option<&str>, content_type: &str, block: &[u8]) -> Vec<u8> {
    warc_with(kind, uri, content_type, block, &[])
}

/// [`warc`] with more header fields (`WARC-Payload-Digest`, `WARC-Profile`, ...).
pub fn warc_with(
    kind: &str,
    uri: Option<&str>,
    content_type: &str,
    block: &[u8],
    fields: &[(&str, &str)],
) -> Vec<u8> {
    let mut out = Vec::new();
    write!(
        out,
        "WARC/1.0\r\nWARC-Type: {kind}\r\nWARC-Date: 2024-05-01T12:00:00Z\r\n"
    )
    .unwrap();
    write!(
        out,
        "WARC-Record-ID: <urn:uuid:{:08x}-0000-0000-0000-000000000000>\r\n",
        block.len()
    )
    .unwrap();
    if let Some(uri) = uri {
        write!(out, "WARC-Target-URI: {uri}\r\n").unwrap();
    }
    for (name, value) in fields {
        write!(out, "{name}: {value}\r\n").unwrap();
    }
    write!(
        out,
        "Content-Type: {content_type}\r\nContent-Length: {}\r\n\r\n",
        block.len()
    )
    .unwrap();
    out.extend_from_slice(block);
    out.extend_from_slice(b"\r\n\r\n");
    out
}

/// An HTTP response block: status line, Content-Type, body.
pub fn http(status: u16, content_type: &str, body: &[u8]) -> Vec<u8> {
    let mut out =
        format!("HTTP/1.1 {status} X\r\nContent-Type: {content_type}\r\n\r\n").into_bytes();
    out.extend_from_slice(body);
    out
}

/// Each record as its own gzip member, as crawlers write `.warc.gz`.
pub fn gzip_members(records: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    for record in records {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(record).unwrap();
        out.extend_from_slice(&gz.finish().unwrap());
    }
    out
}

/// An ARC v1 file: the `filedesc` record, then one record per `(url, content type, content)`
/// with the date 2008-05-09 19:02:41 UTC.
pub fn arc(records: &[(&str, &str, &[u8])]) -> Vec<u8> {
    let desc = b"1 0 Test\nURL IP-address Archive-date Content-type Archive-length\n";
    let mut out = format!(
        "filedesc://test.arc 0.0.0.0 20080509190241 text/plain {}\n",
        desc.len()
    )
    .into_bytes();
    out.extend_from_slice(desc);
    out.push(b'\n');
    for (url, content_type, content) in records {
        writeln!(
            out,
            "{url} 1.2.3.4 20080509190241 {content_type} {}",
            content.len()
        )
        .unwrap();
        out.extend_from_slice(content);
        out.push(b'\n');
    }
    out
}
