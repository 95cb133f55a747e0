//! OpenTelemetry traces (docs/watching.md "Traces"): with an OTLP endpoint
//! in the environment, a span per run and per script run (and per wait),
//! sent over OTLP/HTTP JSON at each script's end and at the run's end.
//! `http://` is a small HTTP/1.1 POST here, `https://` goes through curl
//! (as downloads do, DESIGN.md "Beyond the spec": no TLS crate). Requests
//! go out from a thread of their own, so the loop never waits on a
//! collector; only the run's end waits, bounded, for the last one.
//! Best effort and bounded: short timeouts, and after one failure a note
//! and no more exports this run. Unset, nothing is sent and nothing changes.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::json::{self, Object};
use crate::messages;

const CONNECT: Duration = Duration::from_secs(1);
const IO: Duration = Duration::from_secs(2);
/// The most one request may take, from its start (docs/watching.md
/// "Traces": at most 4 s); also how long the run's end waits for the last.
const REQUEST: Duration = Duration::from_secs(4);

/// Where and how spans go, from the standard `OTEL_*` variables.
struct Config {
    url: String,
    headers: Vec<(String, String)>,
    /// The resource's attributes, as OTLP JSON key-values.
    resource: Vec<String>,
    /// A CA file to trust for `https://` (`OTEL_EXPORTER_OTLP_CERTIFICATE`),
    /// checked readable: curl's `cacert`.
    cacert: Option<String>,
}

fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

impl Config {
    fn from_env() -> Option<Config> {
        if var("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true")) {
            return None;
        }
        let url = var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").or_else(|| {
            var("OTEL_EXPORTER_OTLP_ENDPOINT")
                .map(|e| format!("{}/v1/traces", e.trim().trim_end_matches('/')))
        })?;
        let url = url.trim().to_string();
        let protocol = var("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
            .or_else(|| var("OTEL_EXPORTER_OTLP_PROTOCOL"))
            .unwrap_or_else(|| "http/json".into());
        if protocol.trim() != "http/json" {
            messages::warn(&format!(
                "OTLP protocol {} is not supported (only http/json): no traces are sent",
                crate::text::shown(protocol.trim())
            ));
            return None;
        }
        if !url.starts_with("http://") && !url.starts_with("https://") {
            messages::warn(
                "the OTLP endpoint is not an http:// or https:// URL: no traces are sent",
            );
            return None;
        }
        let cacert = if url.starts_with("https://") {
            Some(certificate()?).filter(|c| !c.is_empty())
        } else {
            None
        };
        let mut headers = pairs("OTEL_EXPORTER_OTLP_HEADERS");
        headers.extend(pairs("OTEL_EXPORTER_OTLP_TRACES_HEADERS"));
        // No header may break the request's lines.
        headers.retain(|(k, v)| !k.is_empty() && !format!("{k}{v}").chars().any(char::is_control));
        let mut attrs = pairs("OTEL_RESOURCE_ATTRIBUTES");
        let service = var("OTEL_SERVICE_NAME")
            .or_else(|| {
                attrs
                    .iter()
                    .find(|(k, _)| k == "service.name")
                    .map(|(_, v)| v.clone())
            })
            .unwrap_or_else(|| "loopx".into());
        attrs.retain(|(k, _)| k != "service.name");
        let mut resource = vec![attr("service.name", Val::S(&service))];
        resource.extend(attrs.iter().map(|(k, v)| attr(k, Val::S(v))));
        Some(Config {
            url,
            headers,
            resource,
            cacert,
        })
    }
}

/// The CA file named by `OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE`, else by
/// `OTEL_EXPORTER_OTLP_CERTIFICATE` (the signal-specific one wins, as for
/// every `OTEL_*` pair), or "" when neither is set; None (after one note)
/// when it names no readable file: with the wrong trust, nothing is sent
/// (docs/watching.md "Traces"). The note names the variable, not its value.
fn certificate() -> Option<String> {
    let (name, path) = [
        "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE",
        "OTEL_EXPORTER_OTLP_CERTIFICATE",
    ]
    .into_iter()
    .find_map(|n| var(n).map(|v| (n, v)))
    .unwrap_or(("", String::new()));
    if path.is_empty() {
        return Some(path);
    }
    let path = path.trim().to_string();
    let problem = match std::fs::File::open(&path).and_then(|f| f.metadata()) {
        Ok(m) if m.is_file() => return Some(path),
        Ok(_) => "not a file".to_string(),
        Err(e) => e.to_string(),
    };
    messages::warn(&format!(
        "{name} does not name a readable CA file ({problem}): no traces are sent"
    ));
    None
}

/// `k=v,k2=v2` with percent-encoded values (the W3C baggage form the
/// `OTEL_*` lists use).
fn pairs(name: &str) -> Vec<(String, String)> {
    let text = var(name).unwrap_or_default();
    text.split(',')
        .filter_map(|p| p.split_once('='))
        .map(|(k, v)| (decode(k.trim()), decode(v.trim())))
        .collect()
}

fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = b
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok());
        match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
            Some(byte) if b[i] == b'%' => {
                out.push(byte);
                i += 3;
            }
            _ => {
                out.push(b[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// An attribute's value.
pub enum Val<'a> {
    S(&'a str),
    I(i64),
    F(f64),
    B(bool),
}

/// One OTLP JSON key-value.
fn attr(key: &str, v: Val) -> String {
    let value = match v {
        Val::S(s) => Object::default().str("stringValue", s),
        Val::I(n) => Object::default().str("intValue", &n.to_string()),
        Val::F(f) => Object::default().raw("doubleValue", &json::number_json(f)),
        Val::B(b) => Object::default().bool("boolValue", b),
    };
    Object::default()
        .str("key", key)
        .raw("value", &value.finish())
        .finish()
}

/// `n` random bytes as lowercase hex, from the system's random source
/// (else from the clock, never all zeros).
fn random_hex(n: usize) -> String {
    let mut bytes = vec![0u8; n];
    let read = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
    if read.is_err() || bytes.iter().all(|&b| b == 0) {
        let seed = now_ns() ^ (u128::from(std::process::id()) << 64);
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = (seed >> ((i % 16) * 8)) as u8 | 1;
        }
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The trace id of a run that inherited no `TRACEPARENT`: a function of its
/// run id alone, so that `loopx resume` (same run id) carries the same trace
/// on (docs/watching.md "Traces"). FNV-1a over 128 bits, then a mixing step
/// so that every bit of the run id moves every bit of the id. It must never
/// change: a run begun by one loopx may be resumed by the next.
fn trace_id_of(run_id: &str) -> String {
    const BASIS: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
    const PRIME: u128 = 0x0000_0000_0100_0000_0000_0000_0000_013b;
    const MIX: u128 = 0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835;
    let mut h = BASIS;
    for b in b"loopx trace ".iter().chain(run_id.as_bytes()) {
        h ^= u128::from(*b);
        h = h.wrapping_mul(PRIME);
    }
    h ^= h >> 64;
    h = h.wrapping_mul(MIX);
    h ^= h >> 59;
    h = h.wrapping_mul(MIX);
    h ^= h >> 64;
    // W3C trace context: an all-zero trace id is invalid.
    format!("{:032x}", h.max(1))
}

fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

/// A W3C `traceparent`'s trace id and parent span id, when it is valid.
fn parse_traceparent(text: &str) -> Option<(String, String)> {
    let parts: Vec<&str> = text.trim().split('-').collect();
    let hex = |s: &str, n: usize| {
        s.len() == n
            && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
            && s.bytes().any(|b| b != b'0')
    };
    match parts.as_slice() {
        [version, trace, parent, flags, ..]
            if version.len() == 2 && *version != "ff" && hex(trace, 32) && hex(parent, 16) =>
        {
            (flags.len() == 2).then(|| (trace.to_string(), parent.to_string()))
        }
        _ => None,
    }
}

/// A span begun and not yet ended.
struct Open {
    id: String,
    start_ns: u128,
}

/// The run's trace: its spans, and the exporter that sends them.
pub struct Tracer {
    trace_id: String,
    /// The inherited `TRACEPARENT`'s span: the run span's parent.
    parent: Option<String>,
    run: Open,
    run_id: String,
    target: String,
    /// `loopx resume` carries this run on: said on its run span.
    resumed: bool,
    script: Option<Open>,
    /// Ended spans not handed to the exporter yet.
    pending: Vec<String>,
    /// Waits so far, in milliseconds.
    waited_ms: u64,
    exporter: Exporter,
    /// An export failed and that was said: nothing more is handed over.
    dead: bool,
}

/// A script span's details.
pub struct ScriptEnd<'a> {
    pub label: &'a str,
    pub iteration: u64,
    pub attempt: u64,
    pub exit_code: Option<i64>,
    pub signal: Option<&'a str>,
    pub class: Option<&'a str>,
    pub cost_usd: Option<f64>,
    pub failed: bool,
}

impl Tracer {
    /// The run's tracer, when an OTLP endpoint is configured.
    pub fn from_env(run_id: &str, target: &str) -> Option<Tracer> {
        let config = Config::from_env()?;
        let inherited = std::env::var("TRACEPARENT")
            .ok()
            .and_then(|t| parse_traceparent(&t));
        // An inherited context wins, at resume too: loopx joins the trace
        // it was started in. Else the run id names the trace.
        let (trace_id, parent) = match inherited {
            Some((trace, parent)) => (trace, Some(parent)),
            None => (trace_id_of(run_id), None),
        };
        let exporter = match Exporter::start(config) {
            Ok(e) => e,
            Err(e) => {
                messages::warn(&format!(
                    "traces cannot be sent (no thread to send them from: {e})"
                ));
                return None;
            }
        };
        Some(Tracer {
            trace_id,
            parent,
            run: Open {
                id: random_hex(8),
                start_ns: now_ns(),
            },
            run_id: run_id.to_string(),
            target: target.to_string(),
            resumed: false,
            script: None,
            pending: Vec::new(),
            waited_ms: 0,
            exporter,
            dead: false,
        })
    }

    /// This run is one `loopx resume` carries on: a new run span in the
    /// same trace, marked `loopx.resumed`.
    pub fn resumed(&mut self) {
        self.resumed = true;
    }

    /// The `TRACEPARENT` of the script span begun last.
    pub fn traceparent(&self) -> Option<String> {
        let s = self.script.as_ref()?;
        Some(format!("00-{}-{}-01", self.trace_id, s.id))
    }

    pub fn script_start(&mut self) {
        self.script = Some(Open {
            id: random_hex(8),
            start_ns: now_ns(),
        });
    }

    pub fn script_end(&mut self, e: &ScriptEnd) {
        let Some(open) = self.script.take() else {
            return;
        };
        let (workflow, script) = e.label.split_once(':').unwrap_or((e.label, ""));
        let mut attrs = vec![
            attr("loopx.run_id", Val::S(&self.run_id)),
            attr("loopx.workflow", Val::S(workflow)),
            attr("loopx.script", Val::S(script)),
            attr("loopx.iteration", Val::I(e.iteration as i64)),
            attr("loopx.attempt", Val::I(e.attempt as i64)),
        ];
        attrs.extend(e.exit_code.map(|c| attr("loopx.exit_code", Val::I(c))));
        attrs.extend(e.signal.map(|s| attr("loopx.signal", Val::S(s))));
        attrs.extend(e.class.map(|c| attr("loopx.class", Val::S(c))));
        attrs.extend(e.cost_usd.map(|c| attr("loopx.cost_usd", Val::F(c))));
        let error = e.failed.then_some("the script failed");
        self.end_span(&open, e.label, now_ns(), &attrs, error);
        self.flush();
    }

    /// A wait of `wait` until `until_ms`: a span of its own, sent now.
    pub fn wait(&mut self, label: &str, until_ms: i64, wait: Duration) {
        let ms = wait.as_millis() as u64;
        self.waited_ms += ms;
        let open = Open {
            id: random_hex(8),
            start_ns: now_ns(),
        };
        let end = u128::try_from(until_ms).unwrap_or(0) * 1_000_000;
        let attrs = [
            attr("loopx.run_id", Val::S(&self.run_id)),
            attr("loopx.target", Val::S(label)),
            attr("loopx.wait_ms", Val::I(ms as i64)),
        ];
        self.end_span(&open, "wait", end.max(open.start_ns), &attrs, None);
        self.flush();
    }

    /// The run's end: its span, and every span left, sent; waits for the
    /// exporter at most [`REQUEST`] (docs/watching.md "Traces").
    pub fn run_end(
        &mut self,
        exit_code: i32,
        reason: &str,
        cost_usd: Option<f64>,
        iterations: u64,
    ) {
        let mut attrs = vec![
            attr("loopx.run_id", Val::S(&self.run_id)),
            attr("loopx.workflow", Val::S(&self.target)),
            attr("loopx.exit_code", Val::I(i64::from(exit_code))),
            attr("loopx.class", Val::S(reason)),
            attr("loopx.iterations", Val::I(iterations as i64)),
            attr("loopx.wait_ms", Val::I(self.waited_ms as i64)),
        ];
        attrs.extend(cost_usd.map(|c| attr("loopx.cost_usd", Val::F(c))));
        if self.resumed {
            attrs.push(attr("loopx.resumed", Val::B(true)));
        }
        let run = Open {
            id: self.run.id.clone(),
            start_ns: self.run.start_ns,
        };
        let name = format!("loopx run {}", self.target);
        let error = (exit_code != 0).then_some(reason);
        self.end_span_with_parent(&run, &name, self.parent.clone(), now_ns(), &attrs, error);
        self.flush();
        self.exporter.finish(Instant::now() + REQUEST);
        self.say_failure();
    }

    fn end_span(
        &mut self,
        open: &Open,
        name: &str,
        end: u128,
        attrs: &[String],
        error: Option<&str>,
    ) {
        let parent = Some(self.run.id.clone());
        self.end_span_with_parent(open, name, parent, end, attrs, error);
    }

    fn end_span_with_parent(
        &mut self,
        open: &Open,
        name: &str,
        parent: Option<String>,
        end: u128,
        attrs: &[String],
        error: Option<&str>,
    ) {
        let status = error.map(|m| Object::default().num("code", 2).str("message", m).finish());
        let mut span = Object::default()
            .str("traceId", &self.trace_id)
            .str("spanId", &open.id);
        // A root span has no parentSpanId at all: `null` is not an id (and
        // OTLP/JSON readers that decode ids as hex choke on it).
        if let Some(parent) = parent.as_deref() {
            span = span.str("parentSpanId", parent);
        }
        let span = span
            .str("name", name)
            .num("kind", 1)
            .str("startTimeUnixNano", &open.start_ns.to_string())
            .str("endTimeUnixNano", &end.to_string())
            .raw("attributes", &format!("[{}]", attrs.join(",")))
            .raw_if("status", status.as_deref())
            .finish();
        self.pending.push(span);
    }

    /// Hands the pending spans to the exporter, which sends them while the
    /// loop goes on; a failure it met since is said here, on this thread
    /// (one note, between the loop's own lines).
    fn flush(&mut self) {
        self.say_failure();
        let spans = std::mem::take(&mut self.pending);
        if !self.dead && !spans.is_empty() {
            self.exporter.send(spans);
        }
    }

    /// Says the exporter's failure, once; nothing more is handed over.
    fn say_failure(&mut self) {
        if self.dead {
            return;
        }
        if let Some(why) = self.exporter.failure() {
            self.dead = true;
            messages::warn(&format!(
                "traces could not be sent to the OTLP endpoint ({why}); \
                 no more are sent this run"
            ));
        }
    }
}

/// What the loop hands the exporter's thread.
enum Job {
    Spans(Vec<String>),
    /// The run's end: send what is left by then, then stop.
    End(Instant),
}

/// The thread that sends spans (module comment: off the loop's path).
struct Exporter {
    jobs: Sender<Job>,
    /// Why an export failed, once one has: the thread stops sending.
    failed: Arc<Mutex<Option<String>>>,
    /// Closed (the sender dropped) when the thread is done.
    done: Receiver<()>,
    finished: bool,
}

impl Exporter {
    fn start(config: Config) -> std::io::Result<Exporter> {
        let (jobs, queue) = mpsc::channel();
        let (done_tx, done) = mpsc::channel::<()>();
        let failed = Arc::new(Mutex::new(None));
        let failure = Arc::clone(&failed);
        std::thread::Builder::new()
            .name("loopx-otel".into())
            .spawn(move || {
                // Signals are the loop's (proc/sys.rs); curl, spawned from
                // here, gets the default mask back from std.
                crate::proc::sys::block_signals_in_this_thread();
                export(&config, &queue, &failure);
                drop(done_tx);
            })?;
        Ok(Exporter {
            jobs,
            failed,
            done,
            finished: false,
        })
    }

    fn send(&self, spans: Vec<String>) {
        // The thread gone (it never panics on purpose): nothing to do.
        let _ = self.jobs.send(Job::Spans(spans));
    }

    fn failure(&self) -> Option<String> {
        self.failed.lock().ok().and_then(|f| f.clone())
    }

    /// Tells the thread to send what is left by `deadline`, and waits for
    /// it until then (and a little: it keeps the deadline itself). A thread
    /// still busy after that is left to the process's exit.
    fn finish(&mut self, deadline: Instant) {
        if std::mem::replace(&mut self.finished, true) {
            return;
        }
        if self.jobs.send(Job::End(deadline)).is_err() {
            return;
        }
        let wait = deadline.saturating_duration_since(Instant::now()) + Duration::from_millis(500);
        // Err(Disconnected) is the thread's end; Err(Timeout) gives up.
        let _ = self.done.recv_timeout(wait);
    }
}

impl Drop for Exporter {
    /// A run that ended without `run_end` (an error on the way out) still
    /// leaves no curl behind it: the thread is told to stop, briefly.
    fn drop(&mut self) {
        self.finish(Instant::now() + Duration::from_secs(1));
    }
}

/// The exporter thread: takes every job queued so far, sends their spans in
/// one request, again until the run's end. After a failure it sends
/// nothing more; a request that curl never answered because it was killed
/// (loopx ending a script ends its other children too, proc/supervisor.rs)
/// is not the collector's failure: its spans go with the next one.
fn export(config: &Config, queue: &Receiver<Job>, failed: &Mutex<Option<String>>) {
    let mut spans: Vec<String> = Vec::new();
    let mut dead = false;
    loop {
        let mut end = None;
        let mut closed = false;
        let mut take = |job| match job {
            Job::Spans(s) => spans.extend(s),
            Job::End(at) => end = Some(at),
        };
        match queue.recv() {
            Ok(job) => take(job),
            Err(_) => closed = true,
        }
        while let Ok(job) = queue.try_recv() {
            take(job);
        }
        if !dead && !spans.is_empty() {
            let now = Instant::now();
            let deadline = end.map_or(now + REQUEST, |at: Instant| at.min(now + REQUEST));
            let body = request_body(config, &spans);
            let problem = match post(config, &body, deadline) {
                Ok(()) => None,
                Err(Failure::Cut) if end.is_none() && !closed => {
                    continue;
                }
                Err(Failure::Cut) => Some("curl was ended before it answered".to_string()),
                Err(Failure::Said(why)) => Some(why),
            };
            spans.clear();
            if let Some(why) = problem {
                dead = true;
                if let Ok(mut f) = failed.lock() {
                    *f = Some(why);
                }
            }
        }
        spans.clear();
        if end.is_some() || closed {
            return;
        }
    }
}

/// One OTLP/JSON `ExportTraceServiceRequest` of `spans`.
fn request_body(config: &Config, spans: &[String]) -> String {
    let scope = Object::default()
        .str("name", "loopx")
        .str("version", env!("CARGO_PKG_VERSION"))
        .finish();
    let scope_spans = Object::default()
        .raw("scope", &scope)
        .raw("spans", &format!("[{}]", spans.join(",")))
        .finish();
    let resource = format!("{{\"attributes\":[{}]}}", config.resource.join(","));
    Object::default()
        .raw(
            "resourceSpans",
            &format!(
                "[{}]",
                Object::default()
                    .raw("resource", &resource)
                    .raw("scopeSpans", &format!("[{scope_spans}]"))
                    .finish()
            ),
        )
        .finish()
}

/// Why a request did not go through.
enum Failure {
    /// curl ended with no answer at all (killed by a signal).
    Cut,
    /// The collector's fault, or the network's: said in the note.
    Said(String),
}

impl From<String> for Failure {
    fn from(s: String) -> Failure {
        Failure::Said(s)
    }
}

/// One POST of `body` to the endpoint, over by `deadline`.
fn post(c: &Config, body: &str, deadline: Instant) -> Result<(), Failure> {
    match c.url.strip_prefix("http://") {
        Some(rest) => Ok(post_http(rest, c, body, deadline)?),
        None => post_curl(c, body, deadline),
    }
}

/// The time left until `deadline`, capped at `cap`; an error once it is up
/// (a zero timeout would mean "none" to the socket calls).
fn left(deadline: Instant, cap: Duration) -> Result<Duration, String> {
    let left = deadline.saturating_duration_since(Instant::now()).min(cap);
    if left < Duration::from_millis(1) {
        return Err("timed out".into());
    }
    Ok(left)
}

fn post_http(rest: &str, c: &Config, body: &str, deadline: Instant) -> Result<(), String> {
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let host_port = authority.rsplit('@').next().unwrap_or(authority);
    let has_port = host_port
        .rsplit_once(':')
        .is_some_and(|(_, p)| !p.contains(']'));
    let target = if has_port {
        host_port.to_string()
    } else {
        format!("{host_port}:80")
    };
    let addrs = target
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve the host: {e}"))?;
    let mut last = "no address for the host".to_string();
    for addr in addrs {
        match TcpStream::connect_timeout(&addr, left(deadline, CONNECT)?) {
            Ok(stream) => return exchange(stream, host_port, path, c, body, deadline),
            Err(e) => last = format!("cannot connect: {e}"),
        }
    }
    Err(last)
}

fn exchange(
    mut s: TcpStream,
    host: &str,
    path: &str,
    c: &Config,
    body: &str,
    deadline: Instant,
) -> Result<(), String> {
    s.set_write_timeout(Some(left(deadline, IO)?))
        .map_err(|e| e.to_string())?;
    let mut req = format!(
        "POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (k, v) in &c.headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    s.write_all(req.as_bytes())
        .map_err(|e| format!("cannot send: {e}"))?;
    let mut head = Vec::new();
    let mut buf = [0u8; 512];
    // Each read bounded by what is left: a collector that trickles its
    // answer a byte at a time still ends by the deadline.
    while !head.contains(&b'\n') && head.len() < 4096 {
        s.set_read_timeout(Some(left(deadline, IO)?))
            .map_err(|e| e.to_string())?;
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => head.extend_from_slice(&buf[..n]),
            Err(e) => return Err(format!("no answer: {e}")),
        }
    }
    let line = String::from_utf8_lossy(&head);
    let status = line.split_whitespace().nth(1).unwrap_or("");
    if status.starts_with('2') && status.len() == 3 {
        Ok(())
    } else {
        Err(format!("HTTP status {}", crate::text::shown(status)))
    }
}

/// curl's config-file quoting: `"..."` with `\` and `"` escaped.
fn quote(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// What curl is told on its stdin: all but its fixed options. Headers (which
/// may carry a token) are here, never on its command line, where any user
/// could read them in /proc (docs/watching.md "Traces").
fn curl_config(c: &Config, body: &str) -> String {
    let mut config = format!("url = {}\n", quote(&c.url));
    // The collector is reached directly, as the `http://` one is: a proxy
    // from the environment would see the spans and the headers.
    config.push_str("noproxy = \"*\"\n");
    if let Some(ca) = &c.cacert {
        config.push_str(&format!("cacert = {}\n", quote(ca)));
    }
    config.push_str("header = \"Content-Type: application/json\"\n");
    for (k, v) in &c.headers {
        config.push_str(&format!("header = {}\n", quote(&format!("{k}: {v}"))));
    }
    // The body is JSON: it starts with `{`, never with the `@` that would
    // make curl read a file.
    config.push_str(&format!("data-binary = {}\n", quote(body)));
    config
}

/// `https://` through curl, bounded by its `--max-time` and, should it
/// overrun, by a kill at `deadline`. Its answer is read from its stdout
/// (`-w`), not its exit status: the loop reaps every child of loopx
/// (proc/process.rs reap_all), this one included, whenever it likes.
fn post_curl(c: &Config, body: &str, deadline: Instant) -> Result<(), Failure> {
    let max = left(deadline, REQUEST)?;
    let mut child = Command::new("curl")
        // `-q` first: no ~/.curlrc (a proxy, a trace file, other options).
        .args([
            "-q",
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code} %{exitcode}",
        ])
        .args(["--connect-timeout", "1", "--proto", "=https"])
        .arg("--max-time")
        .arg(format!("{:.3}", max.as_secs_f64()))
        .args(["-K", "-"])
        // Its own process group: a Ctrl-C at the terminal, sent to loopx's
        // group, leaves the export of the run's last spans to finish.
        .process_group(0)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot run curl: {e}"))?;
    let answer = converse(&mut child, curl_config(c, body).as_bytes(), deadline);
    let Some(answer) = answer else {
        let _ = child.kill();
        return Err(Failure::Said("timed out".into()));
    };
    let answer = String::from_utf8_lossy(&answer);
    let mut words = answer.split_whitespace();
    let (status, code) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    match (status, code) {
        ("", _) => Err(Failure::Cut),
        (s, _) if s.starts_with('2') && s.len() == 3 => Ok(()),
        ("000", "60") => Err(Failure::Said(
            "its certificate is not trusted: see OTEL_EXPORTER_OTLP_CERTIFICATE".into(),
        )),
        ("000", "28") => Err(Failure::Said("timed out".into())),
        ("000", c) if !c.is_empty() => Err(Failure::Said(format!("curl exited with code {c}"))),
        ("000", _) => Err(Failure::Said("curl could not reach it".into())),
        (s, _) => Err(Failure::Said(format!(
            "HTTP status {}",
            crate::text::shown(s)
        ))),
    }
}

/// Writes `input` to the child's stdin and reads its stdout to its end, both
/// at once (a large body need not fit in the pipe), until `deadline`: the
/// output (at most a few hundred bytes are kept), or None when time ran out.
fn converse(child: &mut Child, mut input: &[u8], deadline: Instant) -> Option<Vec<u8>> {
    let mut stdin = child.stdin.take();
    let mut stdout = child.stdout.take()?;
    if let Some(fd) = stdin.as_ref().map(AsRawFd::as_raw_fd) {
        // SAFETY: fcntl on a descriptor this function owns (the pipe to
        // curl); only O_NONBLOCK is added, so a full pipe never blocks.
        unsafe {
            let flags = libc::fcntl(fd, libc::F_GETFL);
            libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK);
        }
    }
    let mut out = Vec::new();
    let mut buf = [0u8; 256];
    loop {
        let wait = left(deadline, REQUEST).ok()?;
        let mut fds = [
            libc::pollfd {
                fd: stdout.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: stdin.as_ref().map_or(-1, AsRawFd::as_raw_fd),
                events: libc::POLLOUT,
                revents: 0,
            },
        ];
        let ms = wait.as_millis().clamp(1, 60_000) as libc::c_int;
        // SAFETY: `fds` is a valid array of two pollfd (a negative fd is
        // skipped by poll).
        if unsafe { libc::poll(fds.as_mut_ptr(), 2, ms) } < 0 {
            // EINTR (signals are blocked here, so hardly) or worse: again,
            // bounded by the deadline.
            continue;
        }
        if fds[1].revents != 0 {
            match stdin.as_mut().map(|s| s.write(input)) {
                Some(Ok(n)) if n < input.len() => input = &input[n..],
                Some(Err(e)) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                // All written (closing stdin ends curl's config), or curl
                // gone (EPIPE): its stdout tells.
                _ => stdin = None,
            }
        }
        if fds[0].revents != 0 {
            match stdout.read(&mut buf) {
                Ok(0) => return Some(out),
                Ok(n) if out.len() < 512 => out.extend_from_slice(&buf[..n]),
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return Some(out),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparents_are_read_strictly() {
        let ok = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        assert_eq!(
            parse_traceparent(ok),
            Some((
                "4bf92f3577b34da6a3ce929d0e0e4736".into(),
                "00f067aa0ba902b7".into()
            ))
        );
        for bad in [
            "",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
        ] {
            assert_eq!(parse_traceparent(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_runs_trace_id_is_a_fixed_function_of_its_run_id() {
        let id = trace_id_of("0123456789abcdef");
        // Pinned: a run begun by this loopx may be resumed by a later one,
        // whose spans must land in the same trace.
        assert_eq!(id, "bc05a7338f9a0bb68bb34cea54842210");
        assert_eq!(trace_id_of("0123456789abcdef"), id);
        let other = trace_id_of("0123456789abcdee");
        assert_ne!(other, id);
        // Valid as a W3C trace id, and one bit of the run id moves many.
        for t in [&id, &other] {
            assert!(parse_traceparent(&format!("00-{t}-00f067aa0ba902b7-01")).is_some());
        }
        let a = u128::from_str_radix(&id, 16).unwrap_or(0);
        let b = u128::from_str_radix(&other, 16).unwrap_or(0);
        assert!((a ^ b).count_ones() > 32, "{id} {other}");
        assert_eq!(trace_id_of("").len(), 32);
    }

    #[test]
    fn curl_is_told_the_secrets_on_stdin_and_no_proxy() {
        let c = Config {
            url: "https://h/v1/traces".into(),
            headers: vec![("x-token".into(), "s\\e\"cret".into())],
            resource: Vec::new(),
            cacert: Some("/ca dir/ca.pem".into()),
        };
        let text = curl_config(&c, "{\"a\":\"\\n\"}");
        assert_eq!(
            text,
            "url = \"https://h/v1/traces\"\nnoproxy = \"*\"\n\
             cacert = \"/ca dir/ca.pem\"\n\
             header = \"Content-Type: application/json\"\n\
             header = \"x-token: s\\\\e\\\"cret\"\n\
             data-binary = \"{\\\"a\\\":\\\"\\\\n\\\"}\"\n"
        );
    }

    #[test]
    fn lists_are_percent_decoded() {
        assert_eq!(decode("a%20b%2Cc%zz"), "a b,c%zz");
        assert_eq!(random_hex(8).len(), 16);
    }
}
