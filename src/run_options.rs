//! What a run is asked to do: `loopx run`'s options (cli/run_flags.rs parses
//! them) and the JS API's (api.rs), the same for both, in a type of their own
//! so the engine never reaches up into the command line's.

use std::path::PathBuf;
use std::time::Duration;

use crate::json::{self, Object, Value};

/// What a run is asked to do: `loopx run`'s options (cli/run_flags.rs) and the
/// JS API's (api.rs), the same for both.
#[derive(Debug, Clone, PartialEq)]
pub struct RunOptions {
    /// Unvalidated: target validation happens after discovery (§4.1).
    pub target: String,
    /// `-n` (§4.2).
    pub max_iterations: Option<u64>,
    /// `-e` (§8.2), relative to the project root.
    pub env_file: Option<PathBuf>,
    /// `--timeout`: the longest one script run may take.
    pub timeout: Option<Duration>,
    /// `--max-time`: no script run starts once this much time has passed.
    pub max_time: Option<Duration>,
    /// `--retry`: how many more times a failed script run is tried.
    pub retry: u64,
    /// `--retry-delay`: the wait before the first retry, doubled after.
    pub retry_delay: Duration,
    /// `--max-wait`: the longest single wait a script may ask for.
    pub max_wait: Duration,
    /// `--max-cost`: no script starts once the run has spent this much
    /// (US dollars, from the scripts' `cost_usd`).
    pub max_cost: Option<f64>,
    /// `run --resume`: resume this project's most recent resumable run of
    /// the target, if there is one.
    pub resume: bool,
    /// `--log`: the JSONL run record (report.rs); `LOOPX_LOG` otherwise.
    pub log: Option<PathBuf>,
    /// `--verbose`: one line per script run on stderr.
    pub verbose: bool,
}

/// `--retry-delay`'s default.
pub const RETRY_DELAY: Duration = Duration::from_secs(10);

/// `--max-wait`'s default: a day.
pub const MAX_WAIT: Duration = Duration::from_secs(24 * 3600);

impl Default for RunOptions {
    fn default() -> RunOptions {
        RunOptions {
            target: String::new(),
            max_iterations: None,
            env_file: None,
            timeout: None,
            max_time: None,
            retry: 0,
            retry_delay: RETRY_DELAY,
            max_wait: MAX_WAIT,
            max_cost: None,
            resume: false,
            log: None,
            verbose: false,
        }
    }
}

impl RunOptions {
    /// The options as the run log's `run_start` records them.
    pub fn to_json(&self) -> String {
        let ms = |d: Option<Duration>| d.map(|d| d.as_millis() as u64);
        let env_file = self.env_file.as_ref().map(|p| p.to_string_lossy());
        Object::default()
            .opt_num("max_iterations", self.max_iterations)
            .opt_str("env_file", env_file.as_deref())
            .opt_num("timeout_ms", ms(self.timeout))
            .opt_num("max_time_ms", ms(self.max_time))
            .num("retry", self.retry)
            .num("retry_delay_ms", self.retry_delay.as_millis() as u64)
            .finish()
    }

    /// Everything `loopx resume` needs to run with these options again, for
    /// the checkpoint: an env file as its path, never its values.
    pub fn saved(&self) -> String {
        let ms = |d: Option<Duration>| d.map(|d| d.as_millis() as u64);
        let path = |p: &Option<PathBuf>| p.as_ref().map(|p| p.to_string_lossy().into_owned());
        let cost = self.max_cost.map(json::number_json);
        Object::default()
            .opt_num("max_iterations", self.max_iterations)
            .opt_str("env_file", path(&self.env_file).as_deref())
            .opt_num("timeout_ms", ms(self.timeout))
            .opt_num("max_time_ms", ms(self.max_time))
            .num("retry", self.retry)
            .num("retry_delay_ms", self.retry_delay.as_millis() as u64)
            .num("max_wait_ms", self.max_wait.as_millis() as u64)
            .raw("max_cost", cost.as_deref().unwrap_or("null"))
            .opt_str("log", path(&self.log).as_deref())
            .bool("verbose", self.verbose)
            .finish()
    }

    /// Options `saved` wrote, for `target`; a field that is missing or of
    /// the wrong type keeps its default.
    pub fn from_saved(target: &str, text: &str) -> RunOptions {
        let mut o = RunOptions {
            target: target.to_string(),
            ..RunOptions::default()
        };
        let Some(v) = json::parse(text) else {
            return o;
        };
        let num = |k: &str| match v.get(k) {
            Some(Value::Number(n)) if n.is_finite() && *n >= 0.0 => Some(*n),
            _ => None,
        };
        let ms = |k: &str| num(k).map(|n| Duration::from_millis(n as u64));
        let path = |k: &str| match v.get(k) {
            Some(Value::String(s)) => Some(PathBuf::from(s)),
            _ => None,
        };
        o.max_iterations = num("max_iterations").map(|n| n as u64);
        o.env_file = path("env_file");
        o.timeout = ms("timeout_ms");
        o.max_time = ms("max_time_ms");
        o.retry = num("retry").map_or(0, |n| n as u64);
        o.retry_delay = ms("retry_delay_ms").unwrap_or(RETRY_DELAY);
        o.max_wait = ms("max_wait_ms").unwrap_or(MAX_WAIT);
        o.max_cost = num("max_cost");
        o.log = path("log");
        o.verbose = matches!(v.get("verbose"), Some(Value::Bool(true)));
        o
    }

    #[cfg(test)]
    pub fn new(target: &str) -> RunOptions {
        RunOptions {
            target: target.to_string(),
            ..RunOptions::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn saved_options_read_back() {
        let o = RunOptions {
            target: "ralph".into(),
            max_iterations: Some(7),
            env_file: Some(PathBuf::from("conf/local.env")),
            timeout: Some(Duration::from_millis(1500)),
            max_time: Some(Duration::from_secs(3600)),
            retry: 2,
            retry_delay: Duration::from_secs(3),
            max_wait: Duration::from_secs(600),
            max_cost: Some(5.25),
            resume: false,
            log: Some(PathBuf::from("/var/log/loop.jsonl")),
            verbose: true,
        };
        assert_eq!(RunOptions::from_saved("ralph", &o.saved()), o);
        let plain = RunOptions::new("w");
        assert_eq!(RunOptions::from_saved("w", &plain.saved()), plain);
        assert_eq!(RunOptions::from_saved("w", "not json"), plain);
    }
}
