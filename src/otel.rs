//! OpenTelemetry traces (docs/watching.md "Traces"): with an OTLP endpoint
//! in the environment, a span per run and per script run (and per wait),
//! sent over OTLP/HTTP JSON at each script's end and at the run's end.
//! `http://` is a small HTTP/1.1 POST here, `https://` goes through curl.
//! Best effort and bounded: short timeouts, and after one failure a note
//! and no more exports this run. Unset, nothing is sent and nothing changes.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::json::{self, Object};
use crate::messages;

const CONNECT: Duration = Duration::from_secs(1);
const IO: Duration = Duration::from_secs(2);

/// Where and how spans go, from the standard `OTEL_*` variables.
struct Config {
    url: String,
    headers: Vec<(String, String)>,
    /// The resource's attributes, as OTLP JSON key-values.
    resource: Vec<String>,
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
        })
    }
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
}

/// One OTLP JSON key-value.
fn attr(key: &str, v: Val) -> String {
    let value = match v {
        Val::S(s) => Object::default().str("stringValue", s),
        Val::I(n) => Object::default().str("intValue", &n.to_string()),
        Val::F(f) => Object::default().raw("doubleValue", &json::number_json(f)),
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

/// The run's trace: its spans, and the exports.
pub struct Tracer {
    config: Config,
    trace_id: String,
    /// The inherited `TRACEPARENT`'s span: the run span's parent.
    parent: Option<String>,
    run: Open,
    run_id: String,
    target: String,
    script: Option<Open>,
    /// Ended spans not sent yet.
    pending: Vec<String>,
    /// Waits so far, in milliseconds.
    waited_ms: u64,
    /// An export failed: no more are tried this run.
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
        let (trace_id, parent) = match inherited {
            Some((trace, parent)) => (trace, Some(parent)),
            None => (random_hex(16), None),
        };
        Some(Tracer {
            config,
            trace_id,
            parent,
            run: Open {
                id: random_hex(8),
                start_ns: now_ns(),
            },
            run_id: run_id.to_string(),
            target: target.to_string(),
            script: None,
            pending: Vec::new(),
            waited_ms: 0,
            dead: false,
        })
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

    /// The run's end: its span, and every span left, sent.
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
        let run = Open {
            id: self.run.id.clone(),
            start_ns: self.run.start_ns,
        };
        let name = format!("loopx run {}", self.target);
        let error = (exit_code != 0).then_some(reason);
        self.end_span_with_parent(&run, &name, self.parent.clone(), now_ns(), &attrs, error);
        self.flush();
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
        let span = Object::default()
            .str("traceId", &self.trace_id)
            .str("spanId", &open.id)
            .opt_str("parentSpanId", parent.as_deref())
            .str("name", name)
            .num("kind", 1)
            .str("startTimeUnixNano", &open.start_ns.to_string())
            .str("endTimeUnixNano", &end.to_string())
            .raw("attributes", &format!("[{}]", attrs.join(",")))
            .raw_if("status", status.as_deref())
            .finish();
        self.pending.push(span);
    }

    /// Sends the pending spans in one request; on failure they are dropped,
    /// said once, and no further export is tried.
    fn flush(&mut self) {
        let spans = std::mem::take(&mut self.pending);
        if self.dead || spans.is_empty() {
            return;
        }
        let scope = Object::default()
            .str("name", "loopx")
            .str("version", env!("CARGO_PKG_VERSION"))
            .finish();
        let scope_spans = Object::default()
            .raw("scope", &scope)
            .raw("spans", &format!("[{}]", spans.join(",")))
            .finish();
        let resource = format!("{{\"attributes\":[{}]}}", self.config.resource.join(","));
        let body = Object::default()
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
            .finish();
        if let Err(why) = post(&self.config, &body) {
            self.dead = true;
            messages::warn(&format!(
                "traces could not be sent to the OTLP endpoint ({why}); \
                 no more are sent this run"
            ));
        }
    }
}

/// One POST of `body` to the endpoint, bounded in time.
fn post(c: &Config, body: &str) -> Result<(), String> {
    match c.url.strip_prefix("http://") {
        Some(rest) => post_http(rest, c, body),
        None => post_curl(c, body),
    }
}

fn post_http(rest: &str, c: &Config, body: &str) -> Result<(), String> {
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
        match TcpStream::connect_timeout(&addr, CONNECT) {
            Ok(stream) => return exchange(stream, host_port, path, c, body),
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
) -> Result<(), String> {
    s.set_write_timeout(Some(IO)).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(IO)).map_err(|e| e.to_string())?;
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
    while !head.contains(&b'\n') && head.len() < 4096 {
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

/// `https://` through curl, its settings on stdin (no header on its
/// command line for `ps` to show).
fn post_curl(c: &Config, body: &str) -> Result<(), String> {
    let quote = |s: &str| {
        let mut q = String::from("\"");
        q.push_str(&s.replace('\\', "\\\\").replace('"', "\\\""));
        q.push('"');
        q
    };
    let mut config = format!("url = {}\n", quote(&c.url));
    config.push_str("header = \"Content-Type: application/json\"\n");
    for (k, v) in &c.headers {
        config.push_str(&format!("header = {}\n", quote(&format!("{k}: {v}"))));
    }
    config.push_str(&format!("data-binary = {}\n", quote(body)));
    let mut child = Command::new("curl")
        .args(["-sSf", "-o", "/dev/null", "--connect-timeout", "1"])
        .args(["--max-time", "4", "--proto", "=https", "-K", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot run curl: {e}"))?;
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(config.as_bytes());
    }
    match child.wait() {
        Ok(s) if s.success() => Ok(()),
        Ok(s) => Err(match s.code() {
            Some(code) => format!("curl exited with code {code}"),
            None => "curl was killed by a signal".into(),
        }),
        Err(e) => Err(format!("cannot wait for curl: {e}")),
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
    fn lists_are_percent_decoded() {
        assert_eq!(decode("a%20b%2Cc%zz"), "a b,c%zz");
        assert_eq!(random_hex(8).len(), 16);
    }
}
