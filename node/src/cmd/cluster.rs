//! CLUSTER (delegated to `tessera_cluster`), READONLY, READWRITE, ASKING.

use bytes::Bytes;

use super::{CmdError, CmdResult, CommandSpec, Ctx};

const DISABLED: &str = "ERR This instance has cluster support disabled";

pub fn commands() -> Vec<CommandSpec> {
    let g = "cluster";
    vec![
        CommandSpec::new("cluster", -2, "stale", (0, 0, 0), cluster)
            .group(g)
            .since("3.0.0")
            .summary("A container for Redis Cluster commands"),
        CommandSpec::new("readonly", 1, "fast loading stale", (0, 0, 0), readonly)
            .group(g)
            .since("3.0.0"),
        CommandSpec::new("readwrite", 1, "fast loading stale", (0, 0, 0), readwrite)
            .group(g)
            .since("3.0.0"),
        CommandSpec::new("asking", 1, "fast", (0, 0, 0), asking)
            .group(g)
            .since("3.0.0"),
    ]
}

fn cluster(ctx: &mut Ctx<'_>, args: &[Bytes]) -> CmdResult {
    let Some(node) = crate::cluster::node(ctx.srv) else {
        return Err(CmdError::msg(DISABLED));
    };
    let a: Vec<&[u8]> = args[1..].iter().map(|b| &b[..]).collect();
    let r = tessera_cluster::commands::cluster_command(node, &a);
    crate::cluster::reply::write(ctx.out, &r);
    Ok(())
}

fn readonly(ctx: &mut Ctx<'_>, _: &[Bytes]) -> CmdResult {
    if !crate::cluster::enabled(ctx.srv) {
        return Err(CmdError::msg(DISABLED));
    }
    ctx.cl.cluster.readonly = true;
    ctx.out.ok();
    Ok(())
}

fn readwrite(ctx: &mut Ctx<'_>, _: &[Bytes]) -> CmdResult {
    if !crate::cluster::enabled(ctx.srv) {
        return Err(CmdError::msg(DISABLED));
    }
    ctx.cl.cluster.readonly = false;
    ctx.out.ok();
    Ok(())
}

fn asking(ctx: &mut Ctx<'_>, _: &[Bytes]) -> CmdResult {
    if !crate::cluster::enabled(ctx.srv) {
        return Err(CmdError::msg(DISABLED));
    }
    ctx.cl.cluster.asking = true;
    ctx.out.ok();
    Ok(())
}
