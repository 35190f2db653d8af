//! `scontrol reboot` and `scontrol cancel_reboot`: a node asked to reboot
//! is sent `RebootProgram` once no job holds it (at once with FORCE), is
//! down meanwhile, and comes back when its daemon registers with a boot
//! time after the request went out; `ResumeTimeout` later it is set DOWN
//! ("reboot timed out"). The request lives in the node's admin state, so
//! it survives a controller restart or failover.

use super::*;
use crate::journal::{RebootNext, RebootRequest};

/// `ResumeTimeout`'s default (seconds).
const RESUME_TIMEOUT: i64 = 60;

/// Append `what` to a node's reason as Slurm does (`old : what`), once.
fn add_reason(a: &mut NodeAdmin, what: &str, now: i64) {
    a.reason = Some(match a.reason.take() {
        Some(r) if r.contains(&format!(" : {what}")) || r == what => r,
        Some(r) => format!("{r} : {what}"),
        None => what.to_string(),
    });
    a.reason_time = Some(now);
    a.reason_uid = Some(0);
}

impl Controller {
    fn resume_timeout(&self) -> i64 {
        self.conf
            .get("ResumeTimeout")
            .and_then(|v| v.trim().parse::<i64>().ok())
            .unwrap_or(RESUME_TIMEOUT)
    }

    /// `scontrol reboot` (or, with `cancel`, `cancel_reboot`): operators
    /// only. A node already waiting for a reboot, FUTURE or external is
    /// skipped (unless FORCE), as Slurm does; when every node named is
    /// skipped, the answer says so.
    pub(super) fn reboot_nodes(
        &mut self,
        who: Caller,
        req: slurm_proto::RebootNodes,
        now: i64,
    ) -> Result<Response, RpcError> {
        let slurm_proto::RebootNodes {
            names,
            asap,
            force,
            next_state,
            reason,
            cancel,
        } = req;
        if !who.admin {
            return err(SlurmError::AccessDenied);
        }
        let names = if names.is_empty() {
            self.nodes.iter().map(|n| n.name.clone()).collect()
        } else {
            names
        };
        for n in &names {
            if !self.node_index.contains_key(n) {
                return err_detail(SlurmError::InvalidNodeName, n.clone());
            }
        }
        if cancel {
            return self.cancel_reboots(&names);
        }
        let next = match next_state {
            None => None,
            Some(NodeStateRequest::Resume) => Some(RebootNext::Resume),
            Some(NodeStateRequest::Down) => Some(RebootNext::Down),
            Some(other) => {
                return err_detail(
                    SlurmError::InvalidNodeState,
                    format!("nextstate must be RESUME or DOWN, not {other:?}"),
                )
            }
        };
        // Nothing to run on the nodes: refused, FORCE or not.
        if self
            .conf
            .get("RebootProgram")
            .is_none_or(|p| p.trim().is_empty())
        {
            return err_detail(
                SlurmError::InvalidNodeState,
                "RebootProgram isn't defined in slurm.conf",
            );
        }
        let mut skipped = Vec::new();
        let mut queued = 0;
        for name in names {
            let i = self.node_index[&name];
            let n = &self.nodes[i];
            let pending = self.p.nodes.get(&name).is_some_and(|a| a.reboot.is_some());
            if n.external || n.base_state == NodeBaseState::Future || (pending && !force) {
                skipped.push(name);
                continue;
            }
            if force {
                self.fail_node_jobs(&name, now);
            }
            let uid = who.uid;
            let reason = reason.clone();
            self.set_admin(&name, |a| {
                let mut r = RebootRequest {
                    asap,
                    next,
                    requested: now,
                    issued: None,
                    drained: false,
                    reason: None,
                };
                if let Some(why) = reason {
                    a.reason = Some(why);
                    a.reason_time = Some(now);
                    a.reason_uid = Some(uid);
                }
                if asap {
                    if !a.drain {
                        a.drain = true;
                        r.drained = true;
                    }
                    if a.reason.is_none() {
                        a.reason = Some("Reboot ASAP".into());
                        a.reason_time = Some(now);
                        a.reason_uid = Some(uid);
                    }
                }
                if a.reason.is_none() {
                    a.reason = Some("reboot requested".into());
                    a.reason_time = Some(now);
                    a.reason_uid = Some(uid);
                }
                r.reason = a.reason.clone();
                a.reboot = Some(r);
            });
            queued += 1;
        }
        if queued > 0 {
            tracing::info!("reboot request queued for {queued} node(s)");
            self.issue_reboots(now, force);
        }
        if !skipped.is_empty() {
            let list = slurm_common::hostlist::compress(&skipped);
            tracing::info!("Skipping reboot of nodes {list} due to current node state");
            if queued == 0 {
                return err_detail(
                    SlurmError::InvalidNodeState,
                    format!("Skipping reboot of nodes {list} due to current node state."),
                );
            }
        }
        Ok(Response::Ok)
    }

    /// `cancel_reboot`: forget reboots not yet sent; a node the request
    /// drained (ASAP) is undrained and the request's reason cleared.
    fn cancel_reboots(&mut self, names: &[String]) -> Result<Response, RpcError> {
        let issued: Vec<&String> = names
            .iter()
            .filter(|n| {
                self.p
                    .nodes
                    .get(*n)
                    .and_then(|a| a.reboot.as_ref())
                    .is_some_and(|r| r.issued.is_some())
            })
            .collect();
        if let Some(n) = issued.first() {
            return err_detail(
                SlurmError::InvalidNodeState,
                format!("the reboot of node {n} was already issued"),
            );
        }
        for name in names {
            let Some(r) = self.p.nodes.get(name).and_then(|a| a.reboot.clone()) else {
                continue;
            };
            self.set_admin(name, |a| {
                a.reboot = None;
                if r.drained {
                    a.drain = false;
                }
                if !a.drain && !a.down && a.reason == r.reason {
                    a.reason = None;
                    a.reason_time = None;
                    a.reason_uid = None;
                }
            });
        }
        Ok(Response::Ok)
    }

    /// Send the reboots whose nodes no job holds any more (with `force`,
    /// every requested one), and set DOWN those that did not come back
    /// within `ResumeTimeout`. Called by the tick and after a request.
    pub(super) fn issue_reboots(&mut self, now: i64, force: bool) {
        let timeout = self.resume_timeout();
        let waiting: Vec<(String, RebootRequest)> = self
            .p
            .nodes
            .iter()
            .filter_map(|(n, a)| a.reboot.clone().map(|r| (n.clone(), r)))
            .collect();
        // Nodes a job holds, found once (only while a reboot waits for one).
        let held: std::collections::HashSet<String> =
            if waiting.iter().any(|(_, r)| r.issued.is_none()) {
                self.p
                    .jobs
                    .values()
                    .filter(|j| Self::holds_devices(j))
                    .flat_map(|j| j.alloc.nodes.iter().cloned())
                    .collect()
            } else {
                Default::default()
            };
        for (name, r) in waiting {
            let Some(&i) = self.node_index.get(&name) else {
                continue;
            };
            match r.issued {
                Some(t) => {
                    if timeout > 0 && now > t + timeout {
                        tracing::warn!("node {name}: reboot timed out (ResumeTimeout={timeout})");
                        self.set_admin(&name, |a| {
                            a.reboot = None;
                            a.down = true;
                            add_reason(a, "reboot timed out", now);
                        });
                        self.nodes[i].flags.not_responding = true;
                        self.registered[i] = false;
                    }
                }
                None => {
                    let n = &self.nodes[i];
                    let down = self.p.nodes.get(&name).is_some_and(|a| a.down);
                    let idle = n.alloc_cpus == 0 && !n.flags.completing && !held.contains(&name);
                    let reachable = self.registered[i] && !n.flags.not_responding;
                    if !(force || (idle && (reachable || down))) {
                        continue;
                    }
                    let Some(addr) = self.node_addr(&name) else {
                        continue;
                    };
                    tracing::info!("node {name}: reboot issued");
                    self.set_admin(&name, |a| {
                        if let Some(r) = a.reboot.as_mut() {
                            r.issued = Some(now);
                        }
                        add_reason(a, "reboot issued", now);
                        if let Some(r) = a.reboot.as_mut() {
                            r.reason = a.reason.clone();
                        }
                    });
                    self.effects.push(Effect::Reboot { node: name, addr });
                }
            }
        }
    }

    /// A node waiting for its reboot registered: done if it booted after
    /// the reboot went out (else still waiting). Then as `nextstate` says:
    /// DOWN stays down ("reboot complete"), RESUME undrains, and an ASAP
    /// request undrains what it drained; the request's reason goes.
    pub(super) fn reboot_registered(&mut self, name: &str, boot_time: i64, now: i64) {
        let Some(r) = self.p.nodes.get(name).and_then(|a| a.reboot.clone()) else {
            return;
        };
        let Some(issued) = r.issued else {
            return;
        };
        if boot_time < issued {
            tracing::info!("node {name} registered without rebooting: still waiting for its boot");
            return;
        }
        tracing::info!("node {name}: reboot complete");
        self.set_admin(name, |a| {
            a.reboot = None;
            match r.next {
                Some(RebootNext::Down) => {
                    a.down = true;
                    add_reason(a, "reboot complete", now);
                    return;
                }
                Some(RebootNext::Resume) => a.drain = false,
                None if r.drained => a.drain = false,
                None => {}
            }
            if !a.drain && !a.down {
                a.reason = None;
                a.reason_time = None;
                a.reason_uid = None;
            }
        });
    }

    /// Waiting for a reboot that was sent: its heartbeats are answered
    /// "register again" (so it tells its boot time), and its silence is
    /// no failure.
    pub(super) fn reboot_issued(&self, name: &str) -> bool {
        self.p
            .nodes
            .get(name)
            .and_then(|a| a.reboot.as_ref())
            .is_some_and(|r| r.issued.is_some())
    }
}
