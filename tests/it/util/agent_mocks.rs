//! Mocks of the three agent APIs, so that the real agent CLIs (installed by
//! scripts/test.sh, at the versions of scripts/agent-clis.txt) can run the
//! ready-made workflows with nothing leaving the machine (DESIGN.md
//! "Testing"): Anthropic Messages (Claude Code), OpenAI Responses (Codex),
//! Gemini `streamGenerateContent` (Gemini CLI), each streamed as SSE from a
//! server on 127.0.0.1.
//!
//! A test scripts the model: a closure gets each conversation turn (the
//! user's text so far and how many tool results it holds) and answers with
//! a tool call (a file write or a shell command), a final text, or a fault.
//! Faults queued with `fail` answer the next model requests first: an error
//! status with or without `retry-after`, or a stream that starts and then
//! hangs. Every request is recorded.
//!
//! `Agent::env` gives a `Run` what its CLI needs to talk to the mock: the
//! CLI first on PATH, its base URL and key, its config files in the run's
//! HOME, its own retries off, and HTTP(S)_PROXY at a dead port on 127.0.0.1
//! (NO_PROXY=127.0.0.1,localhost) so that anything else fails fast.

use super::{ci_cache, Run};
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::Duration;

/// The agent CLIs, with the API each one speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Agent {
    Claude,
    Codex,
    Gemini,
}

/// What the model does on a turn.
#[derive(Clone, Debug)]
pub enum Reply {
    /// A tool call that writes `content` to `path` (relative to the
    /// agent's working directory, or absolute).
    Write(String, String),
    /// A tool call that runs a shell command.
    Shell(String),
    /// The final answer of the turn.
    Text(String),
    /// A fault instead of an answer (the script decides which turn fails).
    Fault(Fault),
}

/// What a request is answered with before the script is consulted.
#[derive(Clone, Debug)]
pub enum Fault {
    /// An error status, with a `retry-after` header (seconds) or none.
    Status(u16, Option<u32>),
    /// 200 and the start of a stream, then nothing until the mock goes.
    Hang,
}

/// One model request, as the mock saw it.
#[derive(Clone, Debug)]
pub struct Turn {
    /// Every text the user side of the conversation holds, joined.
    pub prompt: String,
    /// How many tool results the conversation holds: 0 on its first turn.
    pub tool_results: usize,
}

/// A request as recorded.
#[derive(Clone, Debug)]
pub struct Recorded {
    pub path: String,
    pub body: Value,
    /// The status it was answered with (200 for a stream).
    pub status: u16,
}

type Script = Box<dyn Fn(&Turn) -> Reply + Send + Sync>;

struct State {
    faults: VecDeque<Fault>,
    requests: Vec<Recorded>,
}

struct Shared {
    agent: Agent,
    script: Script,
    state: Mutex<State>,
    stop: AtomicBool,
}

/// A running mock; dropping it ends every connection and the server.
pub struct Mock {
    addr: SocketAddr,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    /// HTTP(S)_PROXY: a port nothing listens on.
    dead: String,
}

impl Mock {
    pub fn start(agent: Agent, script: impl Fn(&Turn) -> Reply + Send + Sync + 'static) -> Mock {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the mock");
        let addr = listener.local_addr().expect("addr");
        let dead = {
            let l = TcpListener::bind("127.0.0.1:0").expect("bind");
            format!("http://{}", l.local_addr().expect("addr"))
        };
        let shared = Arc::new(Shared {
            agent,
            script: Box::new(script),
            state: Mutex::new(State {
                faults: VecDeque::new(),
                requests: Vec::new(),
            }),
            stop: AtomicBool::new(false),
        });
        let thread = {
            let shared = Arc::clone(&shared);
            thread::spawn(move || {
                for conn in listener.incoming() {
                    if shared.stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(conn) = conn else { continue };
                    let shared = Arc::clone(&shared);
                    thread::spawn(move || {
                        let _ = serve(conn, &shared);
                    });
                }
            })
        };
        Mock {
            addr,
            shared,
            thread: Some(thread),
            dead,
        }
    }

    /// Answers the next model request with `fault` (queued in order).
    pub fn fail(&self, fault: Fault) -> &Mock {
        self.state().faults.push_back(fault);
        self
    }

    /// The requests so far.
    pub fn requests(&self) -> Vec<Recorded> {
        self.state().requests.clone()
    }

    /// The model requests so far (those that offered the model tools).
    pub fn model_requests(&self) -> Vec<Recorded> {
        self.requests()
            .into_iter()
            .filter(|r| offers_tools(&r.body))
            .collect()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.shared.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `run` set up to talk to this mock with the real CLI: `home` is the
    /// run's HOME (config files are written there).
    pub fn env(&self, run: Run, home: &Path) -> Run {
        let agent = self.shared.agent;
        let path = format!(
            "{}:{}",
            cli_dir(agent).display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let run = run
            .env("PATH", path)
            .env("AGENT", agent.name())
            .env("HTTP_PROXY", &self.dead)
            .env("HTTPS_PROXY", &self.dead)
            .env("http_proxy", &self.dead)
            .env("https_proxy", &self.dead)
            .env("NO_PROXY", "127.0.0.1,localhost")
            .env("no_proxy", "127.0.0.1,localhost");
        match agent {
            Agent::Claude => run
                .env("ANTHROPIC_BASE_URL", self.url())
                .env("ANTHROPIC_API_KEY", "sk-ant-test")
                .env("CLAUDE_CODE_MAX_RETRIES", "0")
                .env("DISABLE_AUTOUPDATER", "1")
                .env("DISABLE_TELEMETRY", "1")
                .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
            Agent::Codex => {
                let codex_home = home.join(".codex");
                fs::create_dir_all(&codex_home).expect("mkdir CODEX_HOME");
                let config = format!(
                    "model = \"gpt-5.1-codex\"\n\
                     model_provider = \"mock\"\n\
                     [model_providers.mock]\n\
                     name = \"mock\"\n\
                     base_url = \"{}/v1\"\n\
                     wire_api = \"responses\"\n\
                     env_key = \"MOCK_API_KEY\"\n\
                     request_max_retries = 0\n\
                     stream_max_retries = 0\n",
                    self.url()
                );
                fs::write(codex_home.join("config.toml"), config).expect("write config.toml");
                run.env("CODEX_HOME", codex_home)
                    .env("MOCK_API_KEY", "sk-test")
            }
            Agent::Gemini => {
                let dir = home.join(".gemini");
                fs::create_dir_all(&dir).expect("mkdir .gemini");
                let settings = json!({
                    "security": {"auth": {"selectedType": "gemini-api-key"}},
                    "general": {"maxAttempts": 1, "disableAutoUpdate": true},
                    "model": {"name": "gemini-2.5-flash"},
                    "privacy": {"usageStatisticsEnabled": false},
                    "telemetry": {"enabled": false}
                });
                fs::write(dir.join("settings.json"), settings.to_string())
                    .expect("write settings.json");
                run.env("GOOGLE_GEMINI_BASE_URL", self.url())
                    .env("GEMINI_API_KEY", "test-key")
            }
        }
    }
}

impl Drop for Mock {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Agent {
    pub fn name(self) -> &'static str {
        match self {
            Agent::Claude => "claude",
            Agent::Codex => "codex",
            Agent::Gemini => "gemini",
        }
    }
}

/// The pinned version of `agent`'s CLI, from scripts/agent-clis.txt.
pub fn pinned(agent: Agent) -> (String, String) {
    let text = include_str!("../../../scripts/agent-clis.txt");
    text.lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| f.first() == Some(&agent.name()))
        .map(|f| (f[1].to_string(), f[2].to_string()))
        .expect("the agent in scripts/agent-clis.txt")
}

/// Where scripts/test.sh installed `agent`'s CLI: its bin directory.
pub fn cli_dir(agent: Agent) -> PathBuf {
    let (package, version) = pinned(agent);
    let dir = ci_cache()
        .join("agents")
        .join(format!("{}-{version}", agent.name()))
        .join("node_modules/.bin");
    assert!(
        dir.join(agent.name()).is_file(),
        "{package}@{version} is not installed in {}: scripts/test.sh installs it",
        dir.display()
    );
    dir
}

// ------------------------------------------------------------- serving

fn serve(conn: TcpStream, shared: &Shared) -> std::io::Result<()> {
    conn.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut conn = conn;
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or("").to_string();
    let target = parts.next().unwrap_or("").to_string();
    let mut length = 0usize;
    let mut chunked = false;
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h)? == 0 {
            return Ok(());
        }
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            let (k, v) = (k.trim().to_ascii_lowercase(), v.trim());
            if k == "content-length" {
                length = v.parse().unwrap_or(0);
            } else if k == "transfer-encoding" && v.eq_ignore_ascii_case("chunked") {
                chunked = true;
            }
        }
    }
    let mut body = Vec::new();
    if chunked {
        loop {
            let mut size = String::new();
            reader.read_line(&mut size)?;
            let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
            if n == 0 {
                let mut end = String::new();
                reader.read_line(&mut end)?;
                break;
            }
            let mut chunk = vec![0; n + 2];
            reader.read_exact(&mut chunk)?;
            body.extend_from_slice(&chunk[..n]);
        }
    } else {
        body.resize(length, 0);
        reader.read_exact(&mut body)?;
    }
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let path = target.split('?').next().unwrap_or("").to_string();
    if method != "POST" {
        return respond(&mut conn, 404, &[], "{}");
    }
    let agent = shared.agent;
    // Claude Code's side requests (a title, a token count) get a plain
    // answer and are never faulted.
    if !offers_tools(&body) {
        record(shared, &path, &body, 200);
        return match agent {
            Agent::Claude if path.ends_with("/count_tokens") => {
                respond(&mut conn, 200, &[], r#"{"input_tokens":10}"#)
            }
            _ => answer(
                &mut conn,
                agent,
                &Reply::Text("{\"title\":\"A task\"}".into()),
                &body,
            ),
        };
    }
    let queued = {
        let mut st = shared.state.lock().unwrap_or_else(|e| e.into_inner());
        st.faults.pop_front()
    };
    let mut reply = None;
    let fault = queued.or_else(|| match (shared.script)(&turn_of(agent, &body)) {
        Reply::Fault(f) => Some(f),
        r => {
            reply = Some(r);
            None
        }
    });
    match fault {
        Some(Fault::Status(code, retry_after)) => {
            record(shared, &path, &body, code);
            let (headers, text) = error_body(agent, code, retry_after);
            let h: Vec<(&str, String)> = headers.iter().map(|(k, v)| (*k, v.clone())).collect();
            respond(&mut conn, code, &h, &text)
        }
        Some(Fault::Hang) => {
            record(shared, &path, &body, 200);
            sse_head(&mut conn)?;
            // The first bytes of a stream, then silence.
            if agent == Agent::Claude {
                let start = message_start(&body);
                conn.write_all(sse("message_start", &start).as_bytes())?;
                conn.flush()?;
            }
            while !shared.stop.load(Ordering::SeqCst) {
                thread::sleep(Duration::from_millis(50));
            }
            Ok(())
        }
        None => {
            record(shared, &path, &body, 200);
            let reply = reply.unwrap_or_else(|| Reply::Text(String::new()));
            answer(&mut conn, agent, &reply, &body)
        }
    }
}

fn record(shared: &Shared, path: &str, body: &Value, status: u16) {
    let mut st = shared.state.lock().unwrap_or_else(|e| e.into_inner());
    st.requests.push(Recorded {
        path: path.to_string(),
        body: body.clone(),
        status,
    });
}

/// Whether a request offers the model tools: a turn of the agent's loop.
fn offers_tools(body: &Value) -> bool {
    body["tools"].as_array().is_some_and(|t| !t.is_empty())
}

fn respond(
    conn: &mut TcpStream,
    status: u16,
    headers: &[(&str, String)],
    body: &str,
) -> std::io::Result<()> {
    let mut head = format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n",
        if status == 200 { "OK" } else { "Error" },
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    conn.write_all(head.as_bytes())?;
    conn.write_all(body.as_bytes())?;
    conn.flush()
}

fn sse_head(conn: &mut TcpStream) -> std::io::Result<()> {
    conn.write_all(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n",
    )?;
    conn.flush()
}

fn sse(event: &str, data: &Value) -> String {
    if event.is_empty() {
        format!("data: {data}\n\n")
    } else {
        format!("event: {event}\ndata: {data}\n\n")
    }
}

/// The error an API answers `code` with, in its own shape.
fn error_body(
    agent: Agent,
    code: u16,
    retry_after: Option<u32>,
) -> (Vec<(&'static str, String)>, String) {
    let mut headers = Vec::new();
    if let Some(s) = retry_after {
        headers.push(("retry-after", s.to_string()));
    }
    let body = match agent {
        // The error types Anthropic's API answers each status with.
        Agent::Claude => json!({"type": "error", "error": {
            "type": match code {
                400 | 404 | 413 | 422 => "invalid_request_error",
                401 => "authentication_error",
                403 => "permission_error",
                429 => "rate_limit_error",
                529 => "overloaded_error",
                _ => "api_error",
            },
            "message": format!("mock error {code}")}}),
        Agent::Codex => json!({"error": {
            "type": if code == 429 { "rate_limit_exceeded" } else { "server_error" },
            "message": format!("mock error {code}")}}),
        Agent::Gemini => {
            let mut e = json!({"code": code, "message": format!("mock error {code}"),
                "status": if code == 429 { "RESOURCE_EXHAUSTED" } else { "INTERNAL" }});
            if let Some(s) = retry_after {
                e["details"] = json!([{"@type": "type.googleapis.com/google.rpc.RetryInfo",
                    "retryDelay": format!("{s}s")}]);
            }
            json!({"error": e})
        }
    };
    (headers, body.to_string())
}

/// The conversation so far, read from a request.
fn turn_of(agent: Agent, body: &Value) -> Turn {
    let mut prompt = String::new();
    let mut tool_results = 0;
    let empty = Vec::new();
    match agent {
        Agent::Claude => {
            for m in body["messages"].as_array().unwrap_or(&empty) {
                if m["role"] != "user" {
                    continue;
                }
                match &m["content"] {
                    Value::String(s) => prompt.push_str(s),
                    Value::Array(blocks) => {
                        for b in blocks {
                            match b["type"].as_str() {
                                Some("text") => prompt.push_str(b["text"].as_str().unwrap_or("")),
                                Some("tool_result") => tool_results += 1,
                                _ => {}
                            }
                        }
                    }
                    _ => {}
                }
            }
        }
        Agent::Codex => {
            for item in body["input"].as_array().unwrap_or(&empty) {
                match item["type"].as_str() {
                    Some("function_call_output") | Some("custom_tool_call_output") => {
                        tool_results += 1
                    }
                    _ if item["role"] == "user" => {
                        for c in item["content"].as_array().unwrap_or(&empty) {
                            prompt.push_str(c["text"].as_str().unwrap_or(""));
                        }
                    }
                    _ => {}
                }
            }
        }
        Agent::Gemini => {
            for c in body["contents"].as_array().unwrap_or(&empty) {
                for p in c["parts"].as_array().unwrap_or(&empty) {
                    if p.get("functionResponse").is_some() {
                        tool_results += 1;
                    } else if c["role"] == "user" {
                        prompt.push_str(p["text"].as_str().unwrap_or(""));
                    }
                }
            }
        }
    }
    Turn {
        prompt,
        tool_results,
    }
}

fn message_start(body: &Value) -> Value {
    json!({"type": "message_start", "message": {"id": "msg_mock", "type": "message",
        "role": "assistant", "model": body["model"], "content": [], "stop_reason": null,
        "stop_sequence": null, "usage": {"input_tokens": 100, "output_tokens": 1}}})
}

/// A 200 stream with `reply`, in the API's shape.
fn answer(conn: &mut TcpStream, agent: Agent, reply: &Reply, body: &Value) -> std::io::Result<()> {
    let mut out = String::new();
    match agent {
        Agent::Claude => {
            out.push_str(&sse("message_start", &message_start(body)));
            let (block, delta, stop) = match reply {
                Reply::Text(t) => (
                    json!({"type": "text", "text": ""}),
                    json!({"type": "text_delta", "text": t}),
                    "end_turn",
                ),
                Reply::Write(path, content) => (
                    json!({"type": "tool_use", "id": "toolu_mock1", "name": "Write", "input": {}}),
                    json!({"type": "input_json_delta", "partial_json":
                        json!({"file_path": path, "content": content}).to_string()}),
                    "tool_use",
                ),
                Reply::Shell(cmd) => (
                    json!({"type": "tool_use", "id": "toolu_mock1", "name": "Bash", "input": {}}),
                    json!({"type": "input_json_delta", "partial_json":
                        json!({"command": cmd, "description": "a command"}).to_string()}),
                    "tool_use",
                ),
                Reply::Fault(_) => unreachable!("faults are answered before"),
            };
            out.push_str(&sse(
                "content_block_start",
                &json!({"type": "content_block_start", "index": 0, "content_block": block}),
            ));
            out.push_str(&sse(
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": 0, "delta": delta}),
            ));
            out.push_str(&sse(
                "content_block_stop",
                &json!({"type": "content_block_stop", "index": 0}),
            ));
            out.push_str(&sse(
                "message_delta",
                &json!({"type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": null},
                "usage": {"output_tokens": 20}}),
            ));
            out.push_str(&sse("message_stop", &json!({"type": "message_stop"})));
        }
        Agent::Codex => {
            let response = json!({"id": "resp_mock", "object": "response", "status": "in_progress",
                "model": body["model"], "output": []});
            out.push_str(&sse(
                "response.created",
                &json!({"type": "response.created", "response": response}),
            ));
            let item = match reply {
                Reply::Text(t) => {
                    out.push_str(&sse(
                        "response.output_item.added",
                        &json!({
                        "type": "response.output_item.added", "output_index": 0,
                        "item": {"type": "message", "id": "msg_mock", "role": "assistant",
                            "status": "in_progress", "content": []}}),
                    ));
                    out.push_str(&sse(
                        "response.output_text.delta",
                        &json!({
                        "type": "response.output_text.delta", "output_index": 0,
                        "content_index": 0, "item_id": "msg_mock", "delta": t}),
                    ));
                    json!({"type": "message", "id": "msg_mock", "role": "assistant",
                        "status": "completed",
                        "content": [{"type": "output_text", "text": t, "annotations": []}]})
                }
                Reply::Write(path, content) => {
                    let cmd = format!("printf '%s' {} > {}", sh_word(content), sh_word(path));
                    json!({"type": "function_call", "id": "fc_mock", "call_id": "call_mock",
                        "name": "exec_command", "arguments": json!({"cmd": cmd}).to_string(),
                        "status": "completed"})
                }
                Reply::Shell(cmd) => json!({"type": "function_call", "id": "fc_mock",
                    "call_id": "call_mock", "name": "exec_command",
                    "arguments": json!({"cmd": cmd}).to_string(),
                    "status": "completed"}),
                Reply::Fault(_) => unreachable!("faults are answered before"),
            };
            out.push_str(&sse(
                "response.output_item.done",
                &json!({
                "type": "response.output_item.done", "output_index": 0, "item": item}),
            ));
            let mut done = response.clone();
            done["status"] = json!("completed");
            done["usage"] = json!({"input_tokens": 1000, "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": 100, "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": 1100});
            out.push_str(&sse(
                "response.completed",
                &json!({"type": "response.completed", "response": done}),
            ));
        }
        Agent::Gemini => {
            let part = match reply {
                Reply::Text(t) => json!({"text": t}),
                Reply::Write(path, content) => json!({"functionCall": {"name": "write_file",
                    "args": {"file_path": path, "content": content}}}),
                Reply::Shell(cmd) => json!({"functionCall": {"name": "run_shell_command",
                    "args": {"command": cmd}}}),
                Reply::Fault(_) => unreachable!("faults are answered before"),
            };
            out.push_str(&sse(
                "",
                &json!({
                "candidates": [{"content": {"role": "model", "parts": [part]},
                    "finishReason": "STOP", "index": 0}],
                "usageMetadata": {"promptTokenCount": 1000, "candidatesTokenCount": 100,
                    "totalTokenCount": 1100},
                "modelVersion": "gemini-2.5-flash"}),
            ));
        }
    }
    sse_head(conn)?;
    conn.write_all(out.as_bytes())?;
    conn.flush()
}

fn sh_word(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}
