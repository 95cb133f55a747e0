//! Which saved run `loopx resume` (or `loopx run --resume`) carries on, and
//! whether it may (DESIGN.md "Beyond the spec"). The checkpoints themselves
//! are checkpoint.rs's; carrying on is the engine's.

use std::fs;
use std::io;
use std::path::Path;

use crate::checkpoint::{self, Checkpoint, Found, Record};
use crate::error::Error;

/// A resumable checkpoint: its run is not live and its record is whole.
fn resumable(f: &Found) -> Option<&Record> {
    f.record.as_ref().filter(|_| !f.live)
}

/// The run to resume: the one whose id starts with `prefix`, else the most
/// recent resumable run of the project at `root` (of `target`, when given).
/// None when there is no such run and none was named.
pub fn find(
    dir: &Path,
    root: &str,
    target: Option<&str>,
    prefix: Option<&str>,
) -> Result<Option<String>, Error> {
    let found = checkpoint::list(dir).map_err(|(dir, problem)| Error::CheckpointDirRefused {
        dir,
        why: problem.to_string(),
    })?;
    let ours = |f: &&Found| resumable(f).is_some_and(|r| r.root == root);
    let available = || found.iter().filter(ours).map(|f| f.id.clone()).collect();
    let Some(prefix) = prefix else {
        let latest = found
            .iter()
            .filter(ours)
            .find(|f| target.map_or(true, |t| resumable(f).is_some_and(|r| r.target == t)));
        if latest.is_none() {
            left_over(dir, &found, |r| {
                r.root == root && target.map_or(true, |t| r.target == t)
            })?;
        }
        return Ok(latest.map(|f| f.id.clone()));
    };
    let matching: Vec<&Found> = found
        .iter()
        .filter(|f| f.id.starts_with(prefix) && resumable(f).is_some())
        .collect();
    if matching.is_empty() {
        let id_matches = |f: &Found| f.id.starts_with(prefix);
        let named: Vec<&Found> = found.iter().filter(|f| id_matches(f)).collect();
        left_over(dir, named, |_| true)?;
    }
    match matching.as_slice() {
        [one] => Ok(Some(one.id.clone())),
        [] => Err(Error::NothingToResume {
            what: format!("'{}'", crate::text::shown(prefix)),
            available: available(),
        }),
        many => Err(Error::NothingToResume {
            what: format!("'{prefix}' alone: it starts {} run ids", many.len()),
            available: many.iter().map(|f| f.id.clone()).collect(),
        }),
    }
}

/// A run whose lock is held though its loopx is gone (processes it started
/// live on, LOOPX_RUN_ID shed or not) is busy, not missing: says so.
fn left_over<'a>(
    dir: &Path,
    found: impl IntoIterator<Item = &'a Found>,
    wanted: impl Fn(&Record) -> bool,
) -> Result<(), Error> {
    for f in found.into_iter().filter(|f| f.live) {
        if !f.record.as_ref().is_some_and(&wanted) {
            continue;
        }
        let pgids = lock_holders(&Checkpoint::path(dir, &f.id));
        if !pgids.is_empty() {
            return Err(Error::ResumeBusy {
                run_id: f.id.clone(),
                pgids,
            });
        }
    }
    Ok(())
}

/// `loopx forget <id>` / `loopx forget --all`: drops kept runs, so there is
/// nothing to resume. `prefix` names one run, as for `loopx resume`, of any
/// project (a damaged checkpoint too); `None` is every kept run of this
/// user (what `loopx status` lists as resumable). A run whose loopx still
/// runs is refused by name, or left alone by `--all`. Prints one line per
/// run forgotten.
pub fn forget(prefix: Option<&str>) -> Result<(), Error> {
    let Some(dir) = checkpoint::dir() else {
        return crate::messages::print_stdout("no kept runs\n");
    };
    let found = checkpoint::list(&dir).map_err(|(dir, problem)| Error::CheckpointDirRefused {
        dir,
        why: problem.to_string(),
    })?;
    let ids: Vec<&str> = match prefix {
        None => found
            .iter()
            .filter(|f| !f.live)
            .map(|f| f.id.as_str())
            .collect(),
        Some(prefix) => {
            let matching: Vec<&Found> = found.iter().filter(|f| f.id.starts_with(prefix)).collect();
            match matching.as_slice() {
                [one] if one.live => {
                    return Err(Error::ForgetLive {
                        run_id: one.id.clone(),
                    })
                }
                [one] => vec![one.id.as_str()],
                [] => {
                    return Err(Error::NothingToResume {
                        what: format!("'{prefix}' to forget"),
                        available: found
                            .iter()
                            .filter(|f| !f.live)
                            .map(|f| f.id.clone())
                            .collect(),
                    })
                }
                many => {
                    return Err(Error::NothingToResume {
                        what: format!("'{prefix}' alone: it starts {} run ids", many.len()),
                        available: many.iter().map(|f| f.id.clone()).collect(),
                    })
                }
            }
        }
    };
    if ids.is_empty() {
        return crate::messages::print_stdout("no kept runs\n");
    }
    let mut out = String::new();
    for id in ids {
        match checkpoint::forget(&dir, id) {
            Ok(()) => out.push_str(&format!("forgot run {id}\n")),
            // Resumed or started meanwhile: it is not ours to drop.
            Err(e) if e.kind() == io::ErrorKind::WouldBlock && prefix.is_none() => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                return Err(Error::ForgetLive {
                    run_id: id.to_string(),
                })
            }
            Err(e) => return Err(Error::io(format!("cannot forget run {id}"), e)),
        }
    }
    crate::messages::print_stdout(&out)
}

/// Takes over the checkpoint of run `id`, refusing while any process of the
/// run is alive: loopx itself (it holds the checkpoint's lock) or a script
/// it started (after loopx was SIGKILLed, its script runs on).
pub fn take(dir: &Path, id: &str) -> Result<(Checkpoint, Record), Error> {
    let groups = live_groups(id);
    if !groups.is_empty() {
        return Err(Error::ResumeBusy {
            run_id: id.to_string(),
            pgids: groups,
        });
    }
    Checkpoint::take_over(dir, id).map_err(|e| match e.kind() {
        io::ErrorKind::WouldBlock => Error::ResumeBusy {
            run_id: id.to_string(),
            pgids: lock_holders(&Checkpoint::path(dir, id)),
        },
        _ => Error::io(format!("cannot resume run {id}"), e),
    })
}

/// Who holds the run's lock when it is not loopx: every process of a run
/// inherits the checkpoint's locked descriptor (engine.rs), which it cannot
/// shed as it can shed LOOPX_RUN_ID. The process groups of the holders of
/// `path`; none when a loopx is among them (the run is live, not left
/// over).
fn lock_holders(path: &Path) -> Vec<i32> {
    use std::os::unix::fs::MetadataExt;
    let Ok(want) = fs::metadata(path) else {
        return Vec::new();
    };
    let me = std::process::id().to_string();
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut groups = Vec::new();
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|n| *n != me && n.parse::<u32>().is_ok())
        else {
            continue;
        };
        let Ok(fds) = fs::read_dir(e.path().join("fd")) else {
            continue;
        };
        let holds = fds.flatten().any(|fd| {
            fs::metadata(fd.path()).is_ok_and(|m| m.dev() == want.dev() && m.ino() == want.ino())
        });
        if !holds {
            continue;
        }
        let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        if stat.contains(" (loopx) ") {
            return Vec::new();
        }
        if let Some(pgid) = stat_pgid(&stat) {
            groups.push(pgid);
        }
    }
    groups.sort_unstable();
    groups.dedup();
    groups
}

/// The process group in a /proc/<pid>/stat line.
fn stat_pgid(stat: &str) -> Option<i32> {
    let rest = stat.get(stat.rfind(')')? + 2..)?;
    rest.split_whitespace().nth(2)?.parse().ok()
}

/// The process groups of live processes whose environment has
/// `LOOPX_RUN_ID=<id>`: the scripts of that run (§3.4 gives every script
/// the run id) and whatever they started.
fn live_groups(id: &str) -> Vec<i32> {
    let needle = format!("LOOPX_RUN_ID={id}");
    let me = std::process::id();
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut groups: Vec<i32> = entries
        .flatten()
        .filter_map(|e| {
            let pid: u32 = e.file_name().to_str()?.parse().ok()?;
            if pid == me {
                return None;
            }
            let env = fs::read(e.path().join("environ")).ok()?;
            let found = env.split(|&b| b == 0).any(|v| v == needle.as_bytes());
            if !found {
                return None;
            }
            let stat = fs::read_to_string(e.path().join("stat")).ok()?;
            // After the command name, in parentheses: state, ppid, pgrp.
            let rest = &stat[stat.rfind(')')? + 2..];
            let mut fields = rest.split_whitespace();
            let state = fields.next()?;
            (state != "Z").then_some(())?;
            fields.nth(1)?.parse().ok()
        })
        .collect();
    groups.sort_unstable();
    groups.dedup();
    groups
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_with_the_run_id_in_its_environment_is_found_by_its_group() {
        use std::os::unix::process::CommandExt;
        let id = format!("test{:012x}", std::process::id());
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .env("LOOPX_RUN_ID", &id)
            .process_group(0)
            .spawn()
            .expect("spawn sleep");
        let pgid = child.id() as i32;
        // The spawn returns once exec has begun, before the kernel has laid
        // out the new environment: look until it is there.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while live_groups(&id).is_empty() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(live_groups(&id), [pgid]);
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(live_groups(&id), Vec::<i32>::new());
    }
}
