//! Persistence commands: SAVE, BGSAVE \[SCHEDULE\], BGREWRITEAOF. (LASTSAVE lives with the
//! server commands; SHUTDOWN's SAVE/NOSAVE are recorded by `persist::note_shutdown_args`.)

use std::sync::atomic::Ordering;

use crate::cmd::{eq_ic, CmdError, CmdResult, CommandSpec, Ctx};
use crate::persist::{self, PersistError};

pub fn commands() -> Vec<CommandSpec> {
    let none = (0, 0, 0);
    vec![
        CommandSpec::new("save", 1, "admin noscript no_multi", none, save).group("server"),
        CommandSpec::new("bgsave", -1, "admin noscript", none, bgsave).group("server"),
        CommandSpec::new("bgrewriteaof", 1, "admin noscript", none, bgrewriteaof).group("server"),
    ]
}

fn save(ctx: &mut Ctx<'_>, _: &[&[u8]]) -> CmdResult {
    if ctx.srv.persist.bgsave_in_progress.load(Ordering::Acquire) {
        return Err(CmdError::msg("ERR Background save already in progress"));
    }
    match persist::save(ctx.srv) {
        Ok(_) => {
            ctx.out.ok();
            Ok(())
        }
        Err(e) => {
            tracing::warn!(error = %e, "SAVE failed");
            Err(CmdError::msg("ERR"))
        }
    }
}

fn bgsave(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let schedule = match args.get(1) {
        None => false,
        Some(a) if eq_ic(a, "schedule") && args.len() == 2 => true,
        Some(_) => return Err(CmdError::Syntax),
    };
    // Redis 7.0's bgsaveCommand: a running AOF rewrite (its other child) or EXEC
    // schedules the save (SCHEDULE) or refuses it; a running save refuses it.
    let p = &ctx.srv.persist;
    if p.bgsave_in_progress.load(Ordering::Acquire) {
        return Err(CmdError::msg("ERR Background save already in progress"));
    }
    if ctx.in_exec || p.aof.rewrite_in_progress.load(Ordering::Acquire) {
        if !(schedule || ctx.in_exec) {
            return Err(CmdError::msg("ERR Another child process is active (AOF?): can't BGSAVE right now. Use BGSAVE SCHEDULE in order to schedule a BGSAVE whenever possible."));
        }
        p.bgsave_scheduled.store(true, Ordering::Release);
        ctx.out.simple("Background saving scheduled");
        return Ok(());
    }
    match persist::bgsave(ctx.srv) {
        Ok(()) => ctx.out.simple("Background saving started"),
        Err(PersistError::InProgress) => {
            return Err(CmdError::msg("ERR Background save already in progress"))
        }
        Err(e) => return Err(CmdError::msg(format!("ERR {e}"))),
    }
    Ok(())
}

fn bgrewriteaof(ctx: &mut Ctx<'_>, _: &[&[u8]]) -> CmdResult {
    match persist::aof::bgrewrite_command(ctx.srv, ctx.in_exec) {
        Ok(status) => {
            ctx.out.simple(status);
            Ok(())
        }
        Err(e) => Err(CmdError::msg(e)),
    }
}
