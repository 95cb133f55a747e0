//! A small HTTP/1.1 server for tests (DESIGN.md "Testing": install tests use
//! servers the test starts itself). It listens on 127.0.0.1 on an ephemeral
//! port, answers from a background thread, and stops when dropped.
//!
//! It serves a directory tree (GET and HEAD) and programmable routes that win
//! over the tree: any status code, redirects, raw bytes written verbatim (for
//! truncated or malformed responses), a body without `Content-Length` (it
//! ends when the connection closes), a body dripped a few bytes at a time
//! (per route, or for everything the server sends), or a closure that
//! decides per request. Every request is logged so a test can assert what was fetched.
//! One request per connection (`Connection: close`), which curl, wget and
//! Node all handle.
//!
//! ```ignore
//! let server = http::Server::serve_dir(&release_dir)?;
//! server.route("/latest/download/SHA256SUMS", http::Response::status(404));
//! server.route("/old", http::Response::redirect(302, "/new"));
//! let url = server.url(); // http://127.0.0.1:PORT
//! ```

use std::fs;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::Duration;

/// Requests larger than this (head or body) are refused with 413.
const MAX_REQUEST: usize = 1 << 20;
/// A client that stalls this long mid-request is dropped.
const IO_TIMEOUT: Duration = Duration::from_secs(30);

/// One request as the server read it.
#[derive(Clone, Debug)]
pub struct Request {
    pub method: String,
    /// The request target as sent, query string included.
    pub target: String,
    /// The target's path, percent-decoded, without the query string.
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    /// The first header of that name, compared case-insensitively.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// What the server sends back for a route.
#[derive(Clone, Debug)]
pub struct Response {
    body: Body,
    /// Send no `Content-Length`: the body ends when the connection closes.
    no_length: bool,
    drip: Option<Drip>,
}

/// A body sent `bytes` at a time, with a pause of `every` before each piece
/// (a server too slow to be useful, yet never silent for long).
#[derive(Clone, Copy, Debug)]
pub struct Drip {
    pub bytes: usize,
    pub every: Duration,
}

#[derive(Clone, Debug)]
enum Body {
    Http {
        status: u16,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    },
    /// Written as-is, no status line or headers added, then the connection closes.
    Raw(Vec<u8>),
}

impl Response {
    /// 200 with this body (`application/octet-stream`).
    pub fn ok(body: impl Into<Vec<u8>>) -> Response {
        Response::status(200).body(body)
    }

    /// This status with a short text body naming it (none for 204 and 304,
    /// which must not have one).
    pub fn status(status: u16) -> Response {
        let body = match status {
            204 | 304 => Vec::new(),
            _ => format!("{status} {}\n", reason(status)).into_bytes(),
        };
        Response {
            body: Body::Http {
                status,
                headers: Vec::new(),
                body,
            },
            no_length: false,
            drip: None,
        }
    }

    /// A redirect (301, 302, 303, 307 or 308) to `location`, relative or absolute.
    pub fn redirect(status: u16, location: &str) -> Response {
        Response::status(status).header("Location", location)
    }

    /// Bytes written verbatim as the whole response: no status line or
    /// headers are added, e.g. a `Content-Length` promising more than follows.
    pub fn raw(bytes: impl Into<Vec<u8>>) -> Response {
        Response {
            body: Body::Raw(bytes.into()),
            no_length: false,
            drip: None,
        }
    }

    /// Replaces the body (no effect on a raw response).
    pub fn body(mut self, bytes: impl Into<Vec<u8>>) -> Response {
        if let Body::Http { body, .. } = &mut self.body {
            *body = bytes.into();
        }
        self
    }

    /// Sends the body with no `Content-Length`: it ends when the server
    /// closes the connection (as HTTP/1.0 servers and some proxies do).
    pub fn without_length(mut self) -> Response {
        self.no_length = true;
        self
    }

    /// Sends the body (of a raw response: everything) `bytes` at a time,
    /// pausing `every` before each piece.
    pub fn drip(mut self, bytes: usize, every: Duration) -> Response {
        self.drip = Some(Drip { bytes, every });
        self
    }

    /// Adds a header (no effect on a raw response). `Content-Length` and
    /// `Connection` are always set by the server.
    pub fn header(mut self, name: &str, value: &str) -> Response {
        if let Body::Http { headers, .. } = &mut self.body {
            headers.push((name.to_string(), value.to_string()));
        }
        self
    }
}

type Handler = Arc<dyn Fn(&Request) -> Response + Send + Sync>;

struct Shared {
    root: Option<PathBuf>,
    routes: Mutex<Vec<(String, Handler)>>,
    log: Mutex<Vec<Request>>,
    /// Drips every response that does not say otherwise.
    drip: Mutex<Option<Drip>>,
    stop: AtomicBool,
}

/// A running server; dropping it stops the listener and joins its thread.
pub struct Server {
    addr: SocketAddr,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    /// A server with no directory: only routes answer, everything else is 404.
    pub fn new() -> io::Result<Server> {
        Server::start(None)
    }

    /// A server for the files under `root` (URL path `/a/b` is `root/a/b`).
    pub fn serve_dir(root: impl Into<PathBuf>) -> io::Result<Server> {
        Server::start(Some(root.into()))
    }

    fn start(root: Option<PathBuf>) -> io::Result<Server> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            root,
            routes: Mutex::new(Vec::new()),
            log: Mutex::new(Vec::new()),
            drip: Mutex::new(None),
            stop: AtomicBool::new(false),
        });
        let thread = {
            let shared = Arc::clone(&shared);
            thread::Builder::new()
                .name(format!("test-http-{}", addr.port()))
                .spawn(move || accept_loop(listener, shared))?
        };
        Ok(Server {
            addr,
            shared,
            thread: Some(thread),
        })
    }

    /// `http://127.0.0.1:PORT`, without a trailing slash.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The URL of `path` (which starts with `/`).
    pub fn url_for(&self, path: &str) -> String {
        format!("{}{path}", self.url())
    }

    /// Answers requests for exactly `path` (query string ignored) with
    /// `response`, replacing an earlier route for that path.
    pub fn route(&self, path: &str, response: Response) {
        self.route_fn(path, move |_| response.clone());
    }

    /// Answers requests for exactly `path` with whatever `handler` returns.
    pub fn route_fn(
        &self,
        path: &str,
        handler: impl Fn(&Request) -> Response + Send + Sync + 'static,
    ) {
        let mut routes = lock(&self.shared.routes);
        routes.retain(|(p, _)| p != path);
        routes.push((path.to_string(), Arc::new(handler)));
    }

    /// Drips every response (files and routes) that has no drip of its
    /// own: e.g. a dumb-HTTP git repository served from a directory, too
    /// slow to clone.
    pub fn drip_all(&self, bytes: usize, every: Duration) {
        *lock(&self.shared.drip) = Some(Drip { bytes, every });
    }

    /// Every request received so far, oldest first.
    pub fn requests(&self) -> Vec<Request> {
        lock(&self.shared.log).clone()
    }

    /// The decoded paths of every request received so far, oldest first.
    pub fn paths(&self) -> Vec<String> {
        lock(&self.shared.log)
            .iter()
            .map(|r| r.path.clone())
            .collect()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // Also ends the responses still dripping.
        self.shared.stop.store(true, Ordering::SeqCst);
        // Wake the blocking accept(); if even that fails the listener is gone.
        let _ = TcpStream::connect(self.addr);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A poisoned lock only means another handler thread panicked; the data is
/// still usable for a test.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    for stream in listener.incoming() {
        if shared.stop.load(Ordering::SeqCst) {
            break;
        }
        let Ok(stream) = stream else { continue };
        let shared = Arc::clone(&shared);
        // One thread per connection so a stalled client cannot block others.
        let _ = thread::Builder::new().spawn(move || {
            let _ = handle(stream, &shared);
        });
    }
}

fn handle(stream: TcpStream, shared: &Shared) -> io::Result<()> {
    stream.set_read_timeout(Some(IO_TIMEOUT))?;
    stream.set_write_timeout(Some(IO_TIMEOUT))?;
    let mut out = stream.try_clone()?;
    let (mut response, head_only) = match read_request(BufReader::new(stream)) {
        Ok(request) => {
            lock(&shared.log).push(request.clone());
            (respond(&request, shared), request.method == "HEAD")
        }
        Err(status) => (Response::status(status), false),
    };
    if response.drip.is_none() {
        response.drip = *lock(&shared.drip);
    }
    write_response(&mut out, response, head_only, &shared.stop)
}

/// Reads one request; an `Err` is the status to answer with.
fn read_request(mut reader: BufReader<TcpStream>) -> Result<Request, u16> {
    let mut head = Vec::new();
    let mut lines = Vec::new();
    loop {
        let mut line = Vec::new();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => return Err(400),
            Ok(_) => {}
        }
        head.extend_from_slice(&line);
        if head.len() > MAX_REQUEST {
            return Err(413);
        }
        let text = String::from_utf8_lossy(&line)
            .trim_end_matches(['\r', '\n'])
            .to_string();
        if text.is_empty() {
            break;
        }
        lines.push(text);
    }
    let mut lines = lines.into_iter();
    let request_line = lines.next().ok_or(400u16)?;
    let mut parts = request_line.split_whitespace();
    let (Some(method), Some(target), Some(_version)) = (parts.next(), parts.next(), parts.next())
    else {
        return Err(400);
    };
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| {
            l.split_once(':')
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        })
        .collect();
    let length = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .map(|(_, v)| v.parse::<usize>().map_err(|_| 400u16))
        .transpose()?
        .unwrap_or(0);
    if length > MAX_REQUEST {
        return Err(413);
    }
    // Read the body, so the connection stays in step.
    let mut body = vec![0; length];
    reader.read_exact(&mut body).map_err(|_| 400u16)?;
    let raw_path = target.split(['?', '#']).next().unwrap_or("");
    Ok(Request {
        method: method.to_string(),
        target: target.to_string(),
        path: percent_decode(raw_path).ok_or(400u16)?,
        headers,
        body,
    })
}

fn respond(request: &Request, shared: &Shared) -> Response {
    let handler = lock(&shared.routes)
        .iter()
        .find(|(p, _)| *p == request.path)
        .map(|(_, h)| Arc::clone(h));
    if let Some(handler) = handler {
        return handler(request);
    }
    let Some(root) = &shared.root else {
        return Response::status(404);
    };
    if request.method != "GET" && request.method != "HEAD" {
        return Response::status(405).header("Allow", "GET, HEAD");
    }
    match file_under(root, &request.path).map(fs::read) {
        Some(Ok(bytes)) => Response::ok(bytes),
        _ => Response::status(404),
    }
}

/// The regular file `path` names under `root`; `None` for anything that
/// would leave the root, and for directories.
fn file_under(root: &Path, path: &str) -> Option<PathBuf> {
    let mut file = root.to_path_buf();
    for part in Path::new(path.trim_start_matches('/')).components() {
        match part {
            Component::Normal(p) => file.push(p),
            Component::CurDir => {}
            _ => return None,
        }
    }
    file.is_file().then_some(file)
}

/// Writes `response`; `head_only` (a HEAD request) keeps the body's
/// Content-Length but not the body. A dripped body stops early once `stop`
/// is set (the server is dropped) or the client is gone (a write fails).
fn write_response(
    out: &mut TcpStream,
    response: Response,
    head_only: bool,
    stop: &AtomicBool,
) -> io::Result<()> {
    let send = |out: &mut TcpStream, bytes: &[u8]| -> io::Result<()> {
        let Some(drip) = response.drip else {
            return out.write_all(bytes);
        };
        for piece in bytes.chunks(drip.bytes.max(1)) {
            thread::sleep(drip.every);
            if stop.load(Ordering::SeqCst) {
                return Err(io::ErrorKind::Interrupted.into());
            }
            out.write_all(piece)?;
            out.flush()?;
        }
        Ok(())
    };
    match &response.body {
        Body::Raw(bytes) => send(out, bytes)?,
        Body::Http {
            status,
            headers,
            body,
        } => {
            let mut head = format!("HTTP/1.1 {status} {}\r\n", reason(*status));
            let has_type = headers
                .iter()
                .any(|(k, _)| k.eq_ignore_ascii_case("content-type"));
            for (k, v) in headers {
                if !k.eq_ignore_ascii_case("content-length")
                    && !k.eq_ignore_ascii_case("connection")
                {
                    head.push_str(&format!("{k}: {v}\r\n"));
                }
            }
            if !has_type {
                head.push_str("Content-Type: application/octet-stream\r\n");
            }
            if !response.no_length {
                head.push_str(&format!("Content-Length: {}\r\n", body.len()));
            }
            head.push_str("Connection: close\r\n\r\n");
            out.write_all(head.as_bytes())?;
            if !head_only {
                send(out, body)?;
            }
        }
    }
    out.flush()?;
    out.shutdown(std::net::Shutdown::Write)
}

fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3)?;
            let hex = std::str::from_utf8(hex).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        204 => "No Content",
        206 => "Partial Content",
        301 => "Moved Permanently",
        302 => "Found",
        303 => "See Other",
        304 => "Not Modified",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        410 => "Gone",
        413 => "Content Too Large",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "Status",
    }
}
