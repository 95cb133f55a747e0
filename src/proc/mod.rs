//! Running scripts as processes: the one poll loop, spawning and process
//! groups, signals, the shared terminal, descendants that left the group,
//! and the npm shim's parent watch.

pub mod bounded_read;
pub mod descendants;
pub mod process;
pub mod shim_parent;
pub mod signals;
pub mod supervisor;
pub mod sys;
pub mod terminal;
