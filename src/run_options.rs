//! What a run is asked to do: `loopx run`'s options (run_flags.rs parses
//! them) and the JS API's (api.rs), the same for both, in a type of their own
//! so the engine never reaches up into the command line's.

use std::path::PathBuf;
use std::time::Duration;

use crate::json::Object;

/// What a run is asked to do: `loopx run`'s options (run_flags.rs) and the
/// JS API's (api.rs), the same for both.
#[derive(Debug, Clone, PartialEq, Eq)]
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
    /// `--log`: the JSONL run record (report.rs); `LOOPX_LOG` otherwise.
    pub log: Option<PathBuf>,
    /// `--verbose`: one line per script run on stderr.
    pub verbose: bool,
}

/// `--retry-delay`'s default.
pub const RETRY_DELAY: Duration = Duration::from_secs(10);

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

    #[cfg(test)]
    pub fn new(target: &str) -> RunOptions {
        RunOptions {
            target: target.to_string(),
            ..RunOptions::default()
        }
    }
}
