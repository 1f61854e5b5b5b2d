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
    } else {
        None
    }
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
