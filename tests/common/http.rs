//! A minimal HTTP/1.1 client over a plain socket, for the tests and the benchmark of
//! `neardup serve`: keep-alive requests with a `Content-Length` body, and raw bytes for the
//! malformed and stalled requests a general client would refuse to send. Also starting a
//! `neardup serve` child on a free port. Self-contained (the benchmark includes this file).
#![allow(dead_code)]

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// One response: its status, and its body.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "status {}: body is not JSON ({e}): {}",
                self.status,
                String::from_utf8_lossy(&self.body)
            )
        })
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// A keep-alive connection.
pub struct Conn {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
    pub token: Option<String>,
}

impl Conn {
    pub fn connect(addr: SocketAddr) -> io::Result<Conn> {
        let stream = TcpStream::connect(addr)?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(Duration::from_secs(60)))?;
        Ok(Conn {
            reader: BufReader::new(stream.try_clone()?),
            writer: stream,
            token: None,
        })
    }

    /// A request with an optional JSON body.
    pub fn request(
        &mut self,
        method: &str,
        path: &str,
        body: Option<&str>,
    ) -> io::Result<Response> {
        let mut head = format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\n");
        if let Some(token) = &self.token {
            head.push_str(&format!("Authorization: Bearer {token}\r\n"));
        }
        let body = body.unwrap_or("");
        if !body.is_empty() || method == "POST" || method == "PUT" {
            head.push_str(&format!(
                "Content-Type: application/json\r\nContent-Length: {}\r\n",
                body.len()
            ));
        }
        head.push_str("\r\n");
        let mut bytes = head.into_bytes();
        bytes.extend_from_slice(body.as_bytes());
        self.send_raw(&bytes)?;
        self.read_response()
    }

    pub fn send_raw(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.writer.write_all(bytes)
    }

    /// Reads one response (a `Content-Length` body, or to the end of the connection).
    pub fn read_response(&mut self) -> io::Result<Response> {
        let mut line = String::new();
        if self.reader.read_line(&mut line)? == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the connection closed before a response",
            ));
        }
        let status: u16 = line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| io::Error::other(format!("bad status line {line:?}")))?;
        let mut headers = Vec::new();
        loop {
            line.clear();
            self.reader.read_line(&mut line)?;
            let trimmed = line.trim_end();
            if trimmed.is_empty() {
                break;
            }
            if let Some((name, value)) = trimmed.split_once(':') {
                headers.push((name.trim().to_string(), value.trim().to_string()));
            }
        }
        let length = headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
            .and_then(|(_, v)| v.parse::<usize>().ok());
        let mut body = Vec::new();
        match length {
            Some(n) => {
                body.resize(n, 0);
                self.reader.read_exact(&mut body)?;
            }
            None => {
                self.reader.read_to_end(&mut body)?;
            }
        }
        Ok(Response {
            status,
            headers,
            body,
        })
    }
}

/// One request on a new connection.
pub fn request(addr: SocketAddr, method: &str, path: &str, body: Option<&str>) -> Response {
    Conn::connect(addr)
        .and_then(|mut c| c.request(method, path, body))
        .unwrap_or_else(|e| panic!("{method} {path}: {e}"))
}

/// The address in the line `neardup serve: listening on http://ADDR ...` of its stderr.
pub fn listening_address(stderr: &str) -> Option<SocketAddr> {
    let at = stderr.find("listening on http://")? + "listening on http://".len();
    stderr[at..].split_whitespace().next()?.parse().ok()
}

/// A JSON string literal.
pub fn quoted(text: &str) -> String {
    serde_json::Value::String(text.to_string()).to_string()
}
