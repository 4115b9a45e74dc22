//! The HTTP response inside an archive record: status, headers, and the payload with its
//! transfer and content encodings undone.
//!
//! Archives keep the bytes as they crossed the wire, so a payload can still be chunked
//! (`Transfer-Encoding: chunked`) and compressed (`Content-Encoding: gzip`); both are undone
//! here, as warcio's `content_stream()` does. Real crawls hold every kind of broken header, so
//! the head is parsed leniently ([`httparse`] with its tolerant options), and a payload whose
//! encodings cannot be undone is kept as far as it could be decoded.

use std::io::Read;

/// The most header lines an HTTP head may have.
const MAX_HEADERS: usize = 256;

/// What an HTTP response head says.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ResponseHead {
    pub status: u16,
    pub content_type: Option<String>,
    pub chunked: bool,
    pub content_encoding: Option<String>,
    /// Bytes of the head, including the blank line that ends it.
    pub len: usize,
}

/// Why an HTTP head could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeadError {
    /// The block does not hold a whole head (it ends first).
    Incomplete,
    /// The head is malformed; httparse's description.
    Malformed(String),
}

/// True if `block` begins like an HTTP response (`HTTP/1.x`), which some archives leave out
/// of `response` records.
pub fn starts_like_http(block: &[u8]) -> bool {
    block.len() >= 5 && block[..5].eq_ignore_ascii_case(b"HTTP/")
}

/// Parses the HTTP response head at the start of `block`.
pub fn parse_head(block: &[u8]) -> Result<ResponseHead, HeadError> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut response = httparse::Response::new(&mut headers);
    let mut config = httparse::ParserConfig::default();
    config
        .allow_spaces_after_header_name_in_responses(true)
        .allow_obsolete_multiline_headers_in_responses(true)
        .allow_multiple_spaces_in_response_status_delimiters(true)
        .ignore_invalid_headers_in_responses(true);
    let len = match config.parse_response(&mut response, block) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Err(HeadError::Incomplete),
        Err(e) => return Err(HeadError::Malformed(e.to_string())),
    };
    let mut head = ResponseHead {
        status: response.code.unwrap_or(0),
        len,
        ..ResponseHead::default()
    };
    for h in response.headers.iter() {
        let value = || String::from_utf8_lossy(h.value).trim().to_owned();
        if h.name.eq_ignore_ascii_case("content-type") {
            head.content_type = Some(value());
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            head.chunked |= value().to_ascii_lowercase().contains("chunked");
        } else if h.name.eq_ignore_ascii_case("content-encoding") {
            let v = value().to_ascii_lowercase();
            if !v.is_empty() && v != "identity" {
                head.content_encoding = Some(v);
            }
        }
    }
    Ok(head)
}

/// Undoes chunked transfer encoding. A malformed or cut chunk stream keeps what was decoded
/// before the damage (archived payloads are often cut at a size limit); if not even the first
/// chunk size parses, the body was not really chunked and is returned as it is.
pub fn dechunk(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len());
    let mut rest = body;
    let mut first = true;
    loop {
        let Some(eol) = rest.iter().position(|&b| b == b'\n') else {
            if first {
                return body.to_vec();
            }
            break;
        };
        let line = std::str::from_utf8(&rest[..eol]).unwrap_or("");
        let size = line.split(';').next().unwrap_or("").trim();
        let Ok(size) = usize::from_str_radix(size, 16) else {
            if first {
                return body.to_vec();
            }
            break;
        };
        first = false;
        rest = &rest[eol + 1..];
        if size == 0 {
            break;
        }
        let take = size.min(rest.len());
        out.extend_from_slice(&rest[..take]);
        rest = &rest[take..];
        if take < size {
            break;
        }
        // The CRLF after the chunk data.
        let crlf = rest
            .iter()
            .take(2)
            .take_while(|&&b| b == b'\r' || b == b'\n')
            .count();
        rest = &rest[crlf..];
    }
    out
}

/// How a content-encoded payload was decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decoding {
    /// Decoded (or nothing to decode).
    Done,
    /// The encoding is not one neardup knows (`br`, `compress`, ...).
    Unknown,
}

/// Undoes `Content-Encoding` (gzip, x-gzip, deflate), keeping at most `limit` bytes: the rest
/// of a longer payload is dropped, and `*cut` is set. A damaged stream keeps what decoded.
pub fn decode_content(
    body: Vec<u8>,
    encoding: Option<&str>,
    limit: usize,
    cut: &mut bool,
) -> (Vec<u8>, Decoding) {
    let Some(encoding) = encoding else {
        return (body, Decoding::Done);
    };
    let mut out = Vec::new();
    let reader: Box<dyn Read + '_> = match encoding {
        // Crawlers often store the payload already decoded but keep the header (Common
        // Crawl's 2008 ARC files do): a body that is not gzip is taken as it is.
        "gzip" | "x-gzip" if !body.starts_with(&[0x1f, 0x8b]) => {
            return cut_to(body, limit, cut);
        }
        "gzip" | "x-gzip" => Box::new(flate2::read::MultiGzDecoder::new(&body[..])),
        // "deflate" is meant to be zlib, but servers send raw deflate too.
        "deflate" if is_zlib_header(&body) => Box::new(flate2::read::ZlibDecoder::new(&body[..])),
        "deflate" => Box::new(flate2::read::DeflateDecoder::new(&body[..])),
        _ => return (body, Decoding::Unknown),
    };
    let mut limited = reader.take(limit as u64 + 1);
    // An error (a cut or damaged stream) keeps what was decoded; a body that does not
    // decode at all was stored decoded (see above) and is kept as it is.
    let failed = limited.read_to_end(&mut out).is_err() && out.is_empty();
    drop(limited);
    if failed {
        return cut_to(body, limit, cut);
    }
    cut_to(out, limit, cut)
}

fn cut_to(mut body: Vec<u8>, limit: usize, cut: &mut bool) -> (Vec<u8>, Decoding) {
    if body.len() > limit {
        body.truncate(limit);
        *cut = true;
    }
    (body, Decoding::Done)
}

/// RFC 1950: compression method 8 and a header checksum that divides by 31.
fn is_zlib_header(body: &[u8]) -> bool {
    body.len() >= 2
        && body[0] & 0x0f == 8
        && (u16::from(body[0]) << 8 | u16::from(body[1])) % 31 == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn heads_are_parsed_leniently() {
        let head = parse_head(
            b"HTTP/1.1 200 OK\r\nServer:nginx\r\nContent-Type:text/html; charset=utf-8\r\n\
              Transfer-Encoding:chunked\r\nContent-Encoding: gzip\r\n\r\nbody",
        )
        .unwrap();
        assert_eq!(head.status, 200);
        assert_eq!(
            head.content_type.as_deref(),
            Some("text/html; charset=utf-8")
        );
        assert!(head.chunked);
        assert_eq!(head.content_encoding.as_deref(), Some("gzip"));
        assert_eq!(head.len, head.len.min(200));
        assert_eq!(&b"body"[..], &b"HTTP/1.1 200 OK\r\nServer:nginx\r\nContent-Type:text/html; charset=utf-8\r\nTransfer-Encoding:chunked\r\nContent-Encoding: gzip\r\n\r\nbody"[head.len..]);
        // A missing reason phrase, a bad header line and bare LFs are tolerated.
        let head = parse_head(b"HTTP/1.0 404\nX Bad Header\nContent-Type: text/plain\n\n").unwrap();
        assert_eq!(head.status, 404);
        assert_eq!(head.content_type.as_deref(), Some("text/plain"));
        assert_eq!(
            parse_head(b"HTTP/1.1 200 OK\r\nA: b\r\n"),
            Err(HeadError::Incomplete)
        );
        assert!(matches!(
            parse_head(b"HTTX/1.1 200 OK\r\n\r\n"),
            Err(HeadError::Malformed(_))
        ));
        assert!(starts_like_http(b"http/1.1 200"));
        assert!(!starts_like_http(b"<html>"));
    }

    #[test]
    fn chunks_are_joined_and_damage_keeps_the_decoded_part() {
        assert_eq!(
            dechunk(b"5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\n\r\n"),
            b"hello world"
        );
        assert_eq!(dechunk(b"5\r\nhello\r\n10\r\n wor"), b"hello wor");
        assert_eq!(dechunk(b"5\r\nhello\r\nzz\r\n"), b"hello");
        assert_eq!(dechunk(b"<html>not chunked"), b"<html>not chunked");
    }

    #[test]
    fn content_encodings_are_undone_within_the_limit() {
        let text = b"<p>hello hello hello</p>".repeat(10);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(&text).unwrap();
        let gz = gz.finish().unwrap();
        let mut cut = false;
        assert_eq!(
            decode_content(gz.clone(), Some("gzip"), 1 << 20, &mut cut),
            (text.clone(), Decoding::Done)
        );
        assert!(!cut);
        let (short, _) = decode_content(gz.clone(), Some("x-gzip"), 10, &mut cut);
        assert_eq!((short.as_slice(), cut), (&text[..10], true));
        // A cut stream keeps what decoded.
        let mut cut = false;
        let (part, how) = decode_content(
            gz[..gz.len() - 12].to_vec(),
            Some("gzip"),
            1 << 20,
            &mut cut,
        );
        assert_eq!(how, Decoding::Done);
        assert!(
            text.starts_with(&part) && !part.is_empty(),
            "{}",
            part.len()
        );
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        z.write_all(&text).unwrap();
        assert_eq!(
            decode_content(z.finish().unwrap(), Some("deflate"), 1 << 20, &mut cut).0,
            text
        );
        let mut d = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
        d.write_all(&text).unwrap();
        assert_eq!(
            decode_content(d.finish().unwrap(), Some("deflate"), 1 << 20, &mut cut).0,
            text
        );
        assert_eq!(
            decode_content(vec![1, 2], Some("br"), 10, &mut cut).1,
            Decoding::Unknown
        );
        // Stored already decoded, the header kept: taken as it is.
        let plain = b"<!DOCTYPE html><p>x".to_vec();
        assert_eq!(
            decode_content(plain.clone(), Some("gzip"), 1 << 20, &mut cut).0,
            plain
        );
        assert_eq!(
            decode_content(plain.clone(), Some("deflate"), 1 << 20, &mut cut).0,
            plain
        );
    }
}
