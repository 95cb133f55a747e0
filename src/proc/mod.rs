//! Running scripts as processes: the one poll loop, spawning and process
//! groups, signals, the shared terminal, descendants that left the group,
//! the npm shim's parent watch, and the watcher that outlives a killed
//! loopx.

pub mod bounded_read;
pub mod descendants;
pub mod process;
pub mod shim_parent;
pub mod signals;
pub mod supervisor;
pub mod sys;
pub mod terminal;
pub mod watcher;
