//! A `neardup serve` child on a free loopback port (`--listen 127.0.0.1:0`; the address is
//! read from its stderr), killed when dropped.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

pub use super::http::*;
use super::{s, Proc, BIN};

pub struct Server {
    pub proc: Proc,
    pub addr: SocketAddr,
}

impl Server {
    /// `neardup serve --index INDEX --listen 127.0.0.1:0 ARGS...`, once it listens.
    pub fn start(index: &Path, args: &[&str]) -> Server {
        let mut cmd = Command::new(BIN);
        cmd.args(["serve", "--index", s(index), "--listen", "127.0.0.1:0"])
            .args(args);
        Server::spawn(cmd)
    }

    pub fn spawn(cmd: Command) -> Server {
        let mut proc = Proc::spawn("neardup serve", cmd);
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(addr) = listening_address(&proc.stderr()) {
                return Server { proc, addr };
            }
            if proc.poll().is_some() || Instant::now() > deadline {
                proc.wait(Duration::from_secs(1));
                panic!("neardup serve did not start listening\n{}", proc.log());
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn request(&self, method: &str, path: &str, body: Option<&str>) -> Response {
        request(self.addr, method, path, body)
    }

    pub fn conn(&self) -> Conn {
        Conn::connect(self.addr).unwrap()
    }
}
