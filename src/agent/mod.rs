//! `loopx agent`: runs an agent CLI (Claude Code, Codex, Gemini CLI, or any
//! command that reads a prompt on stdin) once, reads its event stream with
//! a typed reader per CLI, prints one line of progress per step, and
//! classifies how it ended (DESIGN.md "Beyond the spec": the agent layer).
//! docs/agent.md is the interface.

pub mod class;
pub mod claude;
pub mod codex;
pub mod cost;
pub mod gemini;
pub mod keep;
pub mod preset;
pub mod progress;
pub mod read;
pub mod reset;
pub mod run;
pub mod settings;
pub mod state;
pub mod stream;
pub mod summary;
