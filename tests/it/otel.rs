//! OpenTelemetry traces (docs/watching.md "Traces"): with an OTLP endpoint
//! set, a span per run and per script run goes to it over OTLP/HTTP JSON.
//! Each request is parsed with the official protobuf definitions
//! (opentelemetry-proto, which scripts/test.sh installs), so a malformed
//! span fails here.

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::util::http::{Response, Server};
use crate::util::*;

/// Parses every request body strictly into an `ExportTraceServiceRequest`,
/// after the OTLP/JSON rule that ids are hex (not base64), and prints one
/// JSON line per span: ids, parent, name, attributes, status code.
const CHECK: &str = r#"
import base64, json, sys
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
for body in json.load(sys.stdin):
    doc = json.loads(body)
    resource = {}
    for rs in doc.get("resourceSpans", []):
        for a in rs.get("resource", {}).get("attributes", []):
            resource[a["key"]] = a["value"]["stringValue"]
        for ss in rs.get("scopeSpans", []):
            for s in ss.get("spans", []):
                for k, n in (("traceId", 16), ("spanId", 8), ("parentSpanId", 8)):
                    if k in s:
                        raw = bytes.fromhex(s[k])
                        assert len(raw) == n, (k, s[k])
                        s[k] = base64.b64encode(raw).decode()
    req = json_format.Parse(json.dumps(doc), ExportTraceServiceRequest())
    for rs in req.resource_spans:
        for ss in rs.scope_spans:
            assert ss.scope.name == "loopx"
            for s in ss.spans:
                attrs = {}
                for a in s.attributes:
                    v = a.value
                    attrs[a.key] = getattr(v, v.WhichOneof("value"))
                assert s.end_time_unix_nano >= s.start_time_unix_nano > 0
                print(json.dumps({
                    "trace": s.trace_id.hex(), "id": s.span_id.hex(),
                    "parent": s.parent_span_id.hex(), "name": s.name,
                    "attrs": attrs, "status": s.status.code, "resource": resource,
                }))
"#;

/// The spans the collector got, parsed by the official definitions.
fn spans(server: &Server) -> Vec<Value> {
    let bodies: Vec<String> = server
        .requests()
        .iter()
        .map(|r| String::from_utf8_lossy(&r.body).into_owned())
        .collect();
    parse(&bodies)
}

/// Where scripts/test.sh installs opentelemetry-proto and trustme.
fn python_otel() -> std::path::PathBuf {
    let py = ci_cache().join("python-otel");
    assert!(
        py.is_dir(),
        "{} is missing: scripts/test.sh installs opentelemetry-proto and trustme there",
        py.display()
    );
    py
}

/// Request bodies parsed by the official definitions: one JSON per span.
fn parse(bodies: &[String]) -> Vec<Value> {
    let mut cmd = Command::new("python3");
    cmd.args(["-c", CHECK]).env("PYTHONPATH", python_otel());
    let out = Run::command(cmd)
        .stdin(
            serde_json::to_string(&bodies)
                .unwrap_or_default()
                .as_bytes(),
        )
        .stdout_any("the spans, parsed below")
        .run();
    out.stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// A two-script workflow that records the TRACEPARENT each script sees.
fn project() -> Project {
    let p = Project::new();
    let record = "printf '%s\\n' \"$TRACEPARENT\" >> \"$LOOPX_PROJECT_ROOT/tp.txt\"\n";
    p.script(
        "w",
        "index.sh",
        &format!("{record}printf '{{\"goto\":\"b\",\"cost_usd\":0.25}}'\n"),
    );
    p.script("w", "b.sh", &format!("{record}exit 3\n"));
    p
}

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT: &str = "00f067aa0ba902b7";

#[test]
fn each_run_and_script_is_a_span_linked_to_its_parent() {
    let server = Server::new().expect("server");
    server.route("/v1/traces", Response::ok(""));
    let p = project();
    p.loopx(&["run", "w"])
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", server.url() + "/")
        .env("OTEL_EXPORTER_OTLP_HEADERS", "x-token=a%20b")
        .env("OTEL_SERVICE_NAME", "svc")
        .env("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=test")
        .env("TRACEPARENT", format!("00-{TRACE}-{PARENT}-01"))
        .status(1)
        .stderr_contains("exited with code 3")
        .run();
    for r in server.requests() {
        assert_eq!((r.method.as_str(), r.path.as_str()), ("POST", "/v1/traces"));
        assert_eq!(r.header("x-token"), Some("a b"));
        assert_eq!(r.header("content-type"), Some("application/json"));
    }
    let spans = spans(&server);
    let names: Vec<&str> = spans.iter().filter_map(|s| s["name"].as_str()).collect();
    assert_eq!(names, ["w:index", "w:b", "loopx run w"], "{spans:?}");
    let run = &spans[2];
    assert_eq!(run["parent"], PARENT);
    assert_eq!(run["attrs"]["loopx.exit_code"], 1);
    assert_eq!(run["attrs"]["loopx.class"], "script_failed");
    assert_eq!(run["status"], 2);
    let mut want_tp = String::new();
    for s in &spans {
        assert_eq!(s["trace"], TRACE, "{s}");
        assert_eq!(s["resource"]["service.name"], "svc");
        assert_eq!(s["resource"]["deployment.environment"], "test");
    }
    for (s, (script, code)) in spans.iter().zip([("index", 0), ("b", 3)]) {
        assert_eq!(s["parent"], run["id"], "{s}");
        let attrs: BTreeMap<String, Value> =
            serde_json::from_value(s["attrs"].clone()).unwrap_or_default();
        assert_eq!(attrs["loopx.workflow"], "w");
        assert_eq!(attrs["loopx.script"], script);
        assert_eq!(attrs["loopx.iteration"], if script == "b" { 2 } else { 1 });
        assert_eq!(attrs["loopx.attempt"], 1);
        assert_eq!(attrs["loopx.exit_code"], code);
        want_tp.push_str(&format!(
            "00-{TRACE}-{}-01\n",
            s["id"].as_str().unwrap_or("")
        ));
    }
    assert_eq!(spans[0]["attrs"]["loopx.cost_usd"], 0.25);
    // Each script saw the TRACEPARENT of its own span.
    assert_eq!(p.read("tp.txt"), want_tp);
}

#[test]
fn a_dead_or_hanging_collector_does_not_hold_the_loop_up() {
    // A closed port, and one that accepts (the backlog) and never answers,
    // over http:// and (a TLS handshake that never comes) https://.
    let closed = {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    };
    let hanging = TcpListener::bind("127.0.0.1:0").expect("bind");
    let hanging_port = hanging.local_addr().expect("addr").port();
    for scheme in ["http", "https"] {
        for port in [closed, hanging_port] {
            let p = Project::new();
            p.script(
                "w",
                "index.sh",
                "date +%s%N >> \"$LOOPX_PROJECT_ROOT/times\"\necho plain\n",
            );
            let t0 = Instant::now();
            let out = p
                .loopx(&["run", "-n", "5", "w"])
                .env(
                    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                    format!("{scheme}://127.0.0.1:{port}/v1/traces"),
                )
                .stderr_contains("traces could not be sent to the OTLP endpoint")
                .run();
            assert_eq!(out.stderr.lines().count(), 1, "{out}");
            // The run's end waits for the last request, at most 4 s.
            assert!(
                t0.elapsed() < Duration::from_secs(7),
                "{scheme} {port}: {out}"
            );
            // The loop itself never waited on the collector: five scripts
            // in well under one request's time (export runs on its own
            // thread, docs/watching.md "Traces").
            let times: Vec<u128> = p
                .read("times")
                .lines()
                .filter_map(|l| l.trim().parse().ok())
                .collect();
            assert_eq!(times.len(), 5);
            let spread = Duration::from_nanos((times[4] - times[0]) as u64);
            assert!(
                spread < Duration::from_millis(900),
                "{scheme} {port}: {spread:?}"
            );
        }
    }
    drop(hanging);
}

#[test]
fn nothing_is_sent_unless_asked_for_over_http_json() {
    let server = Server::new().expect("server");
    server.route("/v1/traces", Response::ok(""));
    let cases: [(&str, &str, &str); 3] = [
        (
            "OTEL_EXPORTER_OTLP_PROTOCOL",
            "grpc",
            "OTLP protocol grpc is not supported",
        ),
        (
            "OTEL_EXPORTER_OTLP_PROTOCOL",
            "http/protobuf",
            "http/protobuf is not supported",
        ),
        ("OTEL_SDK_DISABLED", "true", ""),
    ];
    for (k, v, note) in cases {
        let p = Project::new();
        p.script("w", "index.sh", "echo \"tp=$TRACEPARENT\" >&2\n");
        let mut run = p
            .loopx(&["run", "-n", "1", "w"])
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", server.url())
            .env(k, v)
            .stderr_contains("tp=\n");
        if !note.is_empty() {
            run = run.stderr_contains(note);
        }
        run.run();
    }
    // Unset: no span, and an inherited TRACEPARENT passes through as is.
    let p = Project::new();
    p.script("w", "index.sh", "echo \"tp=$TRACEPARENT\" >&2\n");
    p.loopx(&["run", "-n", "1", "w"])
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .env("TRACEPARENT", "inherited")
        .stderr("tp=inherited\n")
        .run();
    assert!(server.requests().is_empty());
}

/// The trace and run span of each run span among `spans`, in order.
fn run_spans(spans: &[Value]) -> Vec<&Value> {
    spans
        .iter()
        .filter(|s| s["name"] == "loopx run w")
        .collect()
}

#[test]
fn a_resumed_run_continues_its_trace_unless_it_inherits_one() {
    let server = Server::new().expect("server");
    server.route("/v1/traces", Response::ok(""));
    // index hands over to b, which fails while `broken` exists.
    let p = Project::new();
    p.script("w", "index.sh", "printf '{\"goto\":\"b\"}'\n")
        .script(
            "w",
            "b.sh",
            "printf '%s\\n' \"$TRACEPARENT\" >> \"$LOOPX_PROJECT_ROOT/tp.txt\"\n\
             [ -e \"$LOOPX_PROJECT_ROOT/broken\" ] && exit 3\nprintf '{\"stop\":true}'\n",
        )
        .file("broken", "");
    let traced = |r: Run| r.env("OTEL_EXPORTER_OTLP_ENDPOINT", server.url());
    traced(p.loopx(&["run", "w"]))
        .status(1)
        .stderr_contains("loopx: the run can be resumed: loopx resume ")
        .run();
    let first = spans(&server);
    // Resumed in a traced job (still failing): the inherited trace wins.
    traced(p.loopx(&["resume"]))
        .env("TRACEPARENT", format!("00-{TRACE}-{PARENT}-01"))
        .status(1)
        .stderr_contains("loopx: the run can be resumed: loopx resume ")
        .run();
    let all = spans(&server);
    let second = &all[first.len()..];
    // Then resumed without one, and it finishes.
    std::fs::remove_file(p.path("broken")).expect("fix b");
    traced(p.loopx(&["resume"])).run();
    let all = spans(&server);
    let third = &all[first.len() + second.len()..];

    let names = |s: &[Value]| -> Vec<String> {
        s.iter()
            .map(|s| s["name"].as_str().unwrap_or("").to_string())
            .collect()
    };
    assert_eq!(names(&first), ["w:index", "w:b", "loopx run w"]);
    assert_eq!(names(second), ["w:b", "loopx run w"]);
    assert_eq!(names(third), ["w:b", "loopx run w"]);
    let trace = first[0]["trace"].as_str().unwrap_or("").to_string();
    assert_eq!(trace.len(), 32, "{first:?}");
    assert_ne!(trace, TRACE);
    // The first and the last run: one trace, a run span each, the scripts
    // under their own run's span; only the resumed one says it is.
    for (spans, resumed) in [(&first[..], false), (third, true)] {
        let run = run_spans(spans)[0];
        assert_eq!(run["parent"], "", "{run}");
        assert_eq!(
            run["attrs"].get("loopx.resumed").is_some(),
            resumed,
            "{run}"
        );
        if resumed {
            assert_eq!(run["attrs"]["loopx.resumed"], true);
        }
        for s in spans {
            assert_eq!(s["trace"], trace.as_str(), "{s}");
            assert_eq!(
                s["attrs"]["loopx.run_id"],
                first[0]["attrs"]["loopx.run_id"]
            );
            if s["name"] != "loopx run w" {
                assert_eq!(s["parent"], run["id"], "{s}");
            }
        }
    }
    assert_ne!(run_spans(&first)[0]["id"], run_spans(third)[0]["id"]);
    // The inherited context: the resumed run under it, in its trace.
    let run = run_spans(second)[0];
    assert_eq!(run["parent"], PARENT);
    assert_eq!(run["attrs"]["loopx.resumed"], true);
    for s in second {
        assert_eq!(s["trace"], TRACE, "{s}");
    }
    // What b saw each time: its own span, in the trace of its run.
    let tp: Vec<String> = p.read("tp.txt").lines().map(str::to_string).collect();
    let want: Vec<String> = [
        (&trace, &first[1]),
        (&TRACE.to_string(), &second[0]),
        (&trace, &third[0]),
    ]
    .iter()
    .map(|(t, s)| format!("00-{t}-{}-01", s["id"].as_str().unwrap_or("")))
    .collect();
    assert_eq!(tp, want);
}

/// An OTLP/HTTPS collector on 127.0.0.1 with a throw-away CA (trustme):
/// writes `ca.pem` into `dir`, appends each request to `requests.jsonl`,
/// prints its port, and ends when its stdin closes.
const HTTPS_COLLECTOR: &str = r#"
import json, os, ssl, sys, threading, trustme
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
out = sys.argv[1]
ca = trustme.CA()
ca.cert_pem.write_to_path(os.path.join(out, "ca.pem"))
ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
ca.issue_cert("127.0.0.1", "localhost").configure_cert(ctx)
lock = threading.Lock()
class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        rec = {"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()},
               "body": body.decode()}
        with lock, open(os.path.join(out, "requests.jsonl"), "a") as f:
            f.write(json.dumps(rec) + "\n")
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()
    def log_message(self, *args):
        pass
class Server(ThreadingHTTPServer):
    daemon_threads = True
    def handle_error(self, request, address):
        pass  # an untrusting client's aborted handshake
server = Server(("127.0.0.1", 0), Handler)
# The handshake in the request's thread, not in accept.
server.socket = ctx.wrap_socket(server.socket, server_side=True, do_handshake_on_connect=False)
print(server.server_address[1], flush=True)
threading.Thread(target=server.serve_forever, daemon=True).start()
sys.stdin.read()
"#;

/// The HTTPS collector, ended (killed and reaped) on drop.
struct Https {
    child: std::process::Child,
    dir: TempDir,
    port: u16,
}

impl Https {
    fn start() -> Https {
        use std::io::BufRead;
        use std::process::Stdio;
        let dir = TempDir::new("otel-https");
        let mut child = Command::new("python3")
            .args(["-c", HTTPS_COLLECTOR])
            .arg(dir.path())
            .env("PYTHONPATH", python_otel())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the HTTPS collector");
        let mut line = String::new();
        if let Some(out) = child.stdout.take() {
            let _ = std::io::BufReader::new(out).read_line(&mut line);
        }
        let port = line.trim().parse();
        let mut https = Https {
            child,
            dir,
            port: 0,
        };
        https.port = port.unwrap_or_else(|e| panic!("the HTTPS collector's port ({e}): {line:?}"));
        https
    }

    fn url(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    fn ca(&self) -> std::path::PathBuf {
        self.dir.path().join("ca.pem")
    }

    /// The requests so far: path, headers (lower-case names), body.
    fn requests(&self) -> Vec<Value> {
        let text =
            std::fs::read_to_string(self.dir.path().join("requests.jsonl")).unwrap_or_default();
        text.lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect()
    }
}

impl Drop for Https {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A `curl` first on PATH that logs its arguments to `argv.txt` in `dir`
/// (what /proc/<pid>/cmdline shows any user) and runs the real one.
fn logging_curl(dir: &std::path::Path) -> String {
    let real = which("curl").expect("curl on PATH");
    let log = dir.join("argv.txt");
    write_executable(
        &dir.join("bin/curl"),
        &format!(
            "#!/bin/sh\nprintf '%s\\n' \"$@\" >> {}\nexec {} \"$@\"\n",
            sh_quote(&log.to_string_lossy()),
            sh_quote(&real.to_string_lossy())
        ),
    );
    let path = std::env::var("PATH").unwrap_or_default();
    format!("{}:{path}", dir.join("bin").display())
}

/// A proxy nobody listens on, set every way curl reads one (environment,
/// ~/.curlrc): the export must go around it.
fn with_dead_proxy(p: &Project, run: Run) -> Run {
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    };
    let proxy = format!("http://127.0.0.1:{port}");
    p.file(".curlrc", &format!("proxy = \"{proxy}\"\n"));
    let _ = std::fs::copy(p.path(".curlrc"), p.home().join(".curlrc"));
    let mut run = run.env_remove("NO_PROXY").env_remove("no_proxy");
    for k in ["HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"] {
        run = run.env(k, &proxy);
    }
    run
}

#[test]
fn spans_go_to_an_https_collector_trusted_through_its_ca_file() {
    let https = Https::start();
    let p = project();
    let path = logging_curl(p.root());
    let secret = "s3cr3t \"quoted\" \\ value";
    let run = p
        .loopx(&["run", "w"])
        .env("PATH", &path)
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", https.url())
        .env(
            "OTEL_EXPORTER_OTLP_HEADERS",
            "x-token=s3cr3t%20%22quoted%22%20%5C%20value",
        )
        // The signal-specific file wins over the general one (missing).
        .env("OTEL_EXPORTER_OTLP_CERTIFICATE", p.path("no-such-ca.pem"))
        .env("OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE", https.ca())
        .env_remove("TRACEPARENT");
    let out = with_dead_proxy(&p, run)
        .status(1)
        .stderr_contains("loopx: error: script w:b exited with code 3; stopping the loop\n")
        .stderr_lacks("warning")
        .run();
    let requests = https.requests();
    assert!(!requests.is_empty(), "{out}");
    for r in &requests {
        assert_eq!(r["path"], "/v1/traces");
        assert_eq!(r["headers"]["x-token"], secret);
        assert_eq!(r["headers"]["content-type"], "application/json");
    }
    let bodies: Vec<String> = requests
        .iter()
        .map(|r| r["body"].as_str().unwrap_or("").to_string())
        .collect();
    let spans = parse(&bodies);
    let names: Vec<&str> = spans.iter().filter_map(|s| s["name"].as_str()).collect();
    assert_eq!(names, ["w:index", "w:b", "loopx run w"], "{spans:?}");
    for s in &spans[..2] {
        assert_eq!(s["parent"], spans[2]["id"], "{s}");
        assert_eq!(s["trace"], spans[2]["trace"], "{s}");
    }
    assert_eq!(spans[2]["attrs"]["loopx.exit_code"], 1);
    // curl's command line (what any user sees in /proc) holds no header,
    // and it reads no ~/.curlrc (-q first).
    let argv = p.read("argv.txt");
    assert!(!argv.contains("s3cr3t"), "{argv}");
    assert!(!argv.contains("x-token"), "{argv}");
    assert!(argv.starts_with("-q\n"), "{argv}");
    assert_eq!(argv.matches("-q\n").count(), requests.len(), "{argv}");
}

#[test]
fn an_untrusted_or_unreadable_ca_sends_nothing_says_so_once_and_changes_no_exit_code() {
    let https = Https::start();
    // No CA given: curl does not trust the collector's certificate.
    let p = Project::new();
    p.script("w", "index.sh", "echo plain\n");
    let t0 = Instant::now();
    let out = p
        .loopx(&["run", "-n", "3", "w"])
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", https.url())
        .env("OTEL_EXPORTER_OTLP_HEADERS", "x-token=s3cr3t")
        .env_remove("OTEL_EXPORTER_OTLP_CERTIFICATE")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE")
        .stderr(
            "loopx: warning: traces could not be sent to the OTLP endpoint (its certificate \
             is not trusted: see OTEL_EXPORTER_OTLP_CERTIFICATE); no more are sent this run\n",
        )
        .run();
    assert!(t0.elapsed() < Duration::from_secs(6), "{out}");
    assert!(!out.stderr.contains("s3cr3t"));
    // The same, failing: its exit code is the script's.
    let p = Project::new();
    p.script("w", "index.sh", "exit 4\n");
    p.loopx(&["run", "w"])
        .env(
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            https.url() + "/v1/traces",
        )
        .status(1)
        .stderr_contains("loopx: error: script w:index exited with code 4")
        .stderr_contains("its certificate is not trusted")
        .run();
    // A CA file that is not there, or not a file: one note, nothing sent.
    for (ca, problem) in [
        (p.path("missing.pem"), "No such file or directory"),
        (p.root().to_path_buf(), "not a file"),
    ] {
        let out = p
            .loopx(&["run", "-n", "2", "w"])
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", https.url())
            .env("OTEL_EXPORTER_OTLP_CERTIFICATE", &ca)
            .env_remove("OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE")
            .env("LOOPX_TEST_UNUSED", "")
            .status(1)
            .stderr_contains(&format!(
                "loopx: warning: OTEL_EXPORTER_OTLP_CERTIFICATE does not name a readable CA \
                 file ({problem}"
            ))
            .stderr_contains("loopx: error: script w:index exited with code 4")
            .run();
        assert_eq!(out.stderr.matches("warning").count(), 1, "{out}");
        assert!(!out.stderr.contains(&*ca.to_string_lossy()), "{out}");
    }
    assert_eq!(https.requests(), Vec::<Value>::new());
}
