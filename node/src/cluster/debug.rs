//! The DEBUG subcommands of the cluster bus, handed down to `cmd`'s DEBUG through
//! [`crate::cmd::UpperHooks::debug_upper`] (this layer sits above `cmd`).

use crate::cmd::{eq_ic, CmdError, CmdResult, Ctx};

/// DEBUG `args[1]` when it is a cluster-bus subcommand, else None (the next layer goes on).
pub fn debug_upper(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Option<CmdResult> {
    let sub = args.get(1)?;
    // Redis 7.0 matches CLUSTERLINK only as `CLUSTERLINK KILL <dir> <node>`; any other
    // form falls through to DEBUG's syntax error.
    if eq_ic(sub, "clusterlink") && args.len() == 5 && eq_ic(args[2], "kill") {
        Some(clusterlink_kill(ctx, args[3], args[4]))
    } else if eq_ic(sub, "slotmigration") && args.len() == 4 {
        Some(slotmigration(ctx, args[2], args[3]))
    } else {
        None
    }
}

/// `DEBUG SLOTMIGRATION PREVENT-PAUSE|PREVENT-FAILOVER 0|1` (Valkey 9's test hooks): a
/// source that never pauses (its export waits in waiting-to-pause), a target that never
/// takes the slots over (its import waits in failover-granted).
fn slotmigration(ctx: &mut Ctx<'_>, what: &[u8], on: &[u8]) -> CmdResult {
    let flag = match on {
        b"1" => true,
        b"0" => false,
        _ => return Err(CmdError::Syntax),
    };
    let switch = if eq_ic(what, "prevent-pause") {
        &ctx.srv.asm.prevent_pause
    } else if eq_ic(what, "prevent-failover") {
        &ctx.srv.asm.prevent_failover
    } else {
        return Err(CmdError::Syntax);
    };
    switch.store(flag, std::sync::atomic::Ordering::Relaxed);
    ctx.out.ok();
    Ok(())
}

/// `DEBUG CLUSTERLINK KILL to|from|all <node-id>`: frees the link to the node (ours, which
/// the cron redials), from it (the peer's, which it redials) or both, before the next
/// command of the same transaction runs (unit/cluster/links relies on it).
fn clusterlink_kill(ctx: &mut Ctx<'_>, dir: &[u8], id: &[u8]) -> CmdResult {
    let Some(node) = super::node(ctx.srv) else {
        return Err(CmdError::msg(
            "ERR Debug option only available for cluster mode enabled setup!",
        ));
    };
    let unknown = || {
        // As addReplyErrorFormat: line breaks in the argument become spaces.
        let shown: String = String::from_utf8_lossy(id)
            .chars()
            .map(|c| if c == '\r' || c == '\n' { ' ' } else { c })
            .collect();
        CmdError::msg(format!("ERR Unknown node {shown}"))
    };
    let name = tessera_cluster::state::parse_name(id).ok_or_else(unknown)?;
    let (to, from) = if eq_ic(dir, "to") {
        (true, false)
    } else if eq_ic(dir, "from") {
        (false, true)
    } else if eq_ic(dir, "all") {
        (true, true)
    } else {
        // Redis 7.0.15 replies this error and then +OK as well (two replies to one
        // command); we send the error only.
        return Err(CmdError::msg(format!(
            "ERR Unknown direction {}",
            String::from_utf8_lossy(dir).replace(['\r', '\n'], " ")
        )));
    };
    if !node.with_state(|st| st.kill_links(&name, to, from)) {
        return Err(unknown());
    }
    ctx.out.ok();
    Ok(())
}
