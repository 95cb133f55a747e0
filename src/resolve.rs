//! Target resolution (§4.1, §2.2, §7.1 steps 3 and 11): which discovered
//! script a `loopx run` target or a goto names, and what the next iteration
//! runs with which input. Parsing the strings is target.rs's; this module
//! looks the names up.

use crate::discovery::{Discovery, Script, Workflow};
use crate::error::Error;
use crate::output::Output;
use crate::target;

/// A resolved script: the workflow it belongs to and the script itself.
#[derive(Clone, Copy)]
pub struct Resolved<'d> {
    pub workflow: &'d Workflow,
    pub script: &'d Script,
}

impl Resolved<'_> {
    pub fn label(&self) -> String {
        format!("{}:{}", self.workflow.name, self.script.name)
    }
}

/// §7.1 step 3: the starting target of `loopx run`.
pub fn start<'d>(d: &'d Discovery, raw: &str) -> Result<Resolved<'d>, Error> {
    let parsed = target::parse(raw).map_err(|why| Error::InvalidTarget {
        target: raw.to_string(),
        why,
    })?;
    let (w, s, script_given) = parsed.for_run();
    let workflow = d.workflows.get(w).ok_or_else(|| Error::UnknownWorkflow {
        workflow: w.to_string(),
        available: d.workflow_names(),
        goto_from: None,
    })?;
    let script = workflow.scripts.get(s).ok_or_else(|| {
        if script_given {
            Error::UnknownScript {
                workflow: w.to_string(),
                script: s.to_string(),
                available: workflow.script_names(),
                goto_from: None,
            }
        } else {
            Error::MissingIndex {
                workflow: w.to_string(),
                available: workflow.script_names(),
            }
        }
    })?;
    Ok(Resolved { workflow, script })
}

/// §7.1 step 11a–d: a goto value, resolved from the script that issued it.
pub fn goto<'d>(d: &'d Discovery, raw: &str, from: &Resolved<'d>) -> Result<Resolved<'d>, Error> {
    let parsed = target::parse(raw).map_err(|why| Error::InvalidGoto {
        goto: raw.to_string(),
        from: from.label(),
        why,
    })?;
    let (w, s) = parsed.for_goto(&from.workflow.name);
    // Name the goto value as written, not only its resolved parts (§7.2).
    let goto_from = Some(format!("'{raw}' from {}", from.label()));
    let workflow = d.workflows.get(w).ok_or_else(|| Error::UnknownWorkflow {
        workflow: w.to_string(),
        available: d.workflow_names(),
        goto_from: goto_from.clone(),
    })?;
    let script = workflow
        .scripts
        .get(s)
        .ok_or_else(|| Error::UnknownScript {
            workflow: w.to_string(),
            script: s.to_string(),
            available: workflow.script_names(),
            goto_from,
        })?;
    Ok(Resolved { workflow, script })
}

/// What the next iteration runs and what it reads on stdin (§2.3, §6.6).
pub fn next<'d>(
    d: &'d Discovery,
    start: Resolved<'d>,
    current: &Resolved<'d>,
    out: Output,
) -> Result<(Resolved<'d>, Option<String>), Error> {
    match out.goto {
        // The result travels only along a goto, and goto without a result
        // gives the target an empty stdin.
        Some(raw) => Ok((goto(d, &raw, current)?, out.result)),
        // No goto: back to the starting target, with empty stdin.
        None => Ok((start, None)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::path::PathBuf;

    use crate::discovery::Kind;

    /// Workflows with the given scripts, as discovery would list them.
    fn discovered(workflows: &[(&str, &[&str])]) -> Discovery {
        let mut d = Discovery::default();
        for (w, scripts) in workflows {
            let dir = PathBuf::from(format!("/p/.loopx/{w}"));
            let scripts: BTreeMap<String, Script> = scripts
                .iter()
                .map(|s| {
                    let script = Script {
                        name: s.to_string(),
                        path: dir.join(format!("{s}.sh")),
                        kind: Kind::Bash,
                    };
                    (s.to_string(), script)
                })
                .collect();
            let workflow = Workflow {
                name: w.to_string(),
                dir,
                scripts,
            };
            d.workflows.insert(w.to_string(), workflow);
        }
        d
    }

    fn out(result: Option<&str>, goto: Option<&str>) -> Output {
        Output {
            result: result.map(str::to_string),
            goto: goto.map(str::to_string),
            ..Output::default()
        }
    }

    #[test]
    fn a_bare_run_target_is_a_workflow_index() {
        let d = discovered(&[("ralph", &["index", "check"])]);
        assert_eq!(
            start(&d, "ralph").map(|r| r.label()).ok(),
            Some("ralph:index".into())
        );
        assert_eq!(
            start(&d, "ralph:check").map(|r| r.label()).ok(),
            Some("ralph:check".into())
        );
        assert!(matches!(
            start(&d, "nope"),
            Err(Error::UnknownWorkflow { .. })
        ));
        assert!(matches!(
            start(&d, "ralph:nope"),
            Err(Error::UnknownScript { .. })
        ));
        assert!(matches!(
            start(&d, "a:b:c"),
            Err(Error::InvalidTarget { .. })
        ));
        let no_index = discovered(&[("tools", &["lint"])]);
        assert!(matches!(
            start(&no_index, "tools"),
            Err(Error::MissingIndex { .. })
        ));
    }

    #[test]
    fn a_bare_goto_is_a_script_of_the_current_workflow() {
        // §2.2: `check-ready` from ralph is ralph:check-ready, never the
        // workflow of that name.
        let d = discovered(&[
            ("ralph", &["index", "check-ready"]),
            ("check-ready", &["index"]),
            ("review", &["index", "apply"]),
        ]);
        let from = start(&d, "ralph").expect("start");
        let to = |raw: &str| goto(&d, raw, &from).map(|r| r.label()).ok();
        assert_eq!(to("check-ready"), Some("ralph:check-ready".into()));
        assert_eq!(to("review:apply"), Some("review:apply".into()));
        assert_eq!(to("review:index"), Some("review:index".into()));
        assert!(matches!(
            goto(&d, "apply", &from),
            Err(Error::UnknownScript { .. })
        ));
        assert!(matches!(
            goto(&d, ":x", &from),
            Err(Error::InvalidGoto { .. })
        ));
    }

    #[test]
    fn the_result_travels_only_along_a_goto() {
        // §2.3, §6.6: a goto takes the result along; no goto goes back to the
        // starting target with empty stdin.
        let d = discovered(&[("ralph", &["index", "next"])]);
        let first = start(&d, "ralph").expect("start");
        let (to, input) = next(&d, first, &first, out(Some("r"), Some("next"))).expect("goto");
        assert_eq!(
            (to.label(), input.as_deref()),
            ("ralph:next".into(), Some("r"))
        );
        let (to, input) = next(&d, first, &to, out(Some("r"), None)).expect("back");
        assert_eq!((to.label(), input), ("ralph:index".into(), None));
        let (_, input) = next(&d, first, &first, out(None, Some("next"))).expect("goto");
        assert_eq!(input, None);
    }
}
