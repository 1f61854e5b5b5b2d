//! Hostile input (issue 15): each module drives the real tessera-node binary as an attacker
//! would (scripts, a fake master, forged bus frames, slow and huge client frames, failing
//! disks) and checks the node refuses, bounds or survives it as redis-server 7.0 does.

mod acl_checks;
mod acl_file;
mod acl_users;
mod bus;
mod client;
mod lua;
mod persist;
mod ready_probe;
mod repl;
