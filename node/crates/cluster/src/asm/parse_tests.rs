//! Tests of `parse.rs`: every error text of spec §2.2 and §3.2 in its validation order,
//! FINISH, subcommand routing, and never-panic properties.

use super::*;
use crate::asm::machine::LinkMsg;
use proptest::prelude::*;

pub(crate) const ME: Name = [b'a'; 40];
pub(crate) const B: Name = [b'b'; 40];
pub(crate) const C: Name = [b'c'; 40];
const UNKNOWN: Name = [b'd'; 40];
const JOB: &[u8; 40] = b"0123456789abcdef0123456789abcdef01234567";

/// A hand-filled [`View`].
pub(crate) struct FakeView {
    pub myself: Name,
    pub primary: bool,
    pub owners: Vec<Option<Name>>,
    pub known: Vec<Name>,
    pub manual_importing: bool,
    pub manual_migrating: bool,
    pub module: Option<String>,
    pub exporting: SlotSet,
    pub importing: SlotSet,
}

impl FakeView {
    /// Myself = ME, a primary; B and C known; no slot assigned.
    pub(crate) fn new() -> FakeView {
        FakeView {
            myself: ME,
            primary: true,
            owners: vec![None; SLOTS],
            known: vec![ME, B, C],
            manual_importing: false,
            manual_migrating: false,
            module: None,
            exporting: SlotSet::new(),
            importing: SlotSet::new(),
        }
    }
    pub(crate) fn assign(&mut self, start: u16, end: u16, owner: Name) {
        for s in start..=end {
            self.owners[s as usize] = Some(owner);
        }
    }
    /// 0-99 mine, 100-199 B's, the rest unassigned.
    fn standard() -> FakeView {
        let mut v = FakeView::new();
        v.assign(0, 99, ME);
        v.assign(100, 199, B);
        v
    }
}

impl View for FakeView {
    fn myself(&self) -> Name {
        self.myself
    }
    fn is_primary(&self) -> bool {
        self.primary
    }
    fn owner(&self, slot: u16) -> Option<Name> {
        self.owners.get(slot as usize).copied().flatten()
    }
    fn knows(&self, node: &Name) -> bool {
        self.known.contains(node)
    }
    fn manual_importing(&self) -> bool {
        self.manual_importing
    }
    fn manual_migrating(&self) -> bool {
        self.manual_migrating
    }
    fn module_without_asm(&self) -> Option<String> {
        self.module.clone()
    }
    fn exporting_slot(&self, slot: u16) -> bool {
        self.exporting.contains(slot)
    }
    fn importing_slot(&self, slot: u16) -> bool {
        self.importing.contains(slot)
    }
}

fn toks(s: &str) -> Vec<Vec<u8>> {
    s.split_whitespace()
        .map(|t| match t {
            "<ME>" => ME.to_vec(),
            "<B>" => B.to_vec(),
            "<C>" => C.to_vec(),
            "<UNKNOWN>" => UNKNOWN.to_vec(),
            "<JOB>" => JOB.to_vec(),
            other => other.as_bytes().to_vec(),
        })
        .collect()
}

fn migrate(view: &FakeView, s: &str) -> Result<Vec<(Vec<SlotRange>, Name)>, String> {
    let t = toks(s);
    let refs: Vec<&[u8]> = t.iter().map(|a| a.as_slice()).collect();
    parse_migrateslots(&refs, view)
}

fn migrate_err(view: &FakeView, s: &str) -> String {
    match migrate(view, s) {
        Err(e) => e,
        Ok(v) => panic!("{s}: accepted {v:?}"),
    }
}

fn establish(view: &FakeView, s: &str, tracking: bool) -> Result<Establish, String> {
    let t = toks(s);
    let refs: Vec<&[u8]> = t.iter().map(|a| a.as_slice()).collect();
    parse_establish(&refs, view, tracking)
}

fn establish_err(view: &FakeView, s: &str, tracking: bool) -> String {
    match establish(view, s, tracking) {
        Err(e) => e,
        Ok(v) => panic!("{s}: accepted {v:?}"),
    }
}

fn r(start: u16, end: u16) -> SlotRange {
    SlotRange { start, end }
}

#[test]
fn migrateslots_node_checks_come_first() {
    let mut v = FakeView::standard();
    v.module = Some("vm".into());
    v.primary = false;
    v.manual_importing = true;
    v.manual_migrating = true;
    let bad = "FOO";
    assert_eq!(migrate_err(&v, bad), module_unsupported("vm"));
    v.module = None;
    assert_eq!(migrate_err(&v, bad), ONLY_PRIMARY);
    v.primary = true;
    assert_eq!(migrate_err(&v, bad), MANUALLY_IMPORTED);
    v.manual_importing = false;
    assert_eq!(migrate_err(&v, bad), MANUALLY_MIGRATED);
    v.manual_migrating = false;
    assert_eq!(migrate_err(&v, bad), SYNTAX_ERROR);
}

#[test]
fn migrateslots_range_errors() {
    let v = FakeView::standard();
    let cases: &[(&str, String)] = &[
        ("NODE <C>", SYNTAX_ERROR.into()),
        ("SLOTSRANGE 16384 1 NODE <C>", INVALID_SLOT.into()),
        ("SLOTSRANGE -1 1 NODE <C>", INVALID_SLOT.into()),
        ("SLOTSRANGE 99999999999999999999 1", NO_RANGES.into()),
        ("SLOTSRANGE 1", NO_END_SLOT.into()),
        ("SLOTSRANGE 1 x NODE <C>", INVALID_SLOT.into()),
        ("SLOTSRANGE 1 16384 NODE <C>", INVALID_SLOT.into()),
        ("SLOTSRANGE 5 1 NODE <C>", start_after_end(5, 1)),
        ("SLOTSRANGE 250 260 NODE <C>", no_node_served(250)),
        ("SLOTSRANGE 95 105 NODE <C>", SPAN_SHARDS.into()),
        ("SLOTSRANGE 0 1 150 150 NODE <C>", SPAN_SHARDS.into()),
        // The first earlier range in list order is the one reported.
        (
            "SLOTSRANGE 10 20 0 1 0 30 NODE <C>",
            range_overlap(r(0, 30), r(10, 20)),
        ),
        (
            "SLOTSRANGE 0 10 5 5 NODE <C>",
            range_overlap(r(5, 5), r(0, 10)),
        ),
        ("SLOTSRANGE a 0 NODE <C>", NO_RANGES.into()),
        ("SLOTSRANGE", NO_RANGES.into()),
        // string2ll: no leading zeros, no '+', so these end the list.
        ("SLOTSRANGE 01 2 NODE <C>", NO_RANGES.into()),
        ("SLOTSRANGE +1 2 NODE <C>", NO_RANGES.into()),
        ("SLOTSRANGE 100 101 NODE <C>", NOT_SERVED.into()),
    ];
    for (cmd, want) in cases {
        assert_eq!(&migrate_err(&v, cmd), want, "{cmd}");
    }
}

#[test]
fn migrateslots_group_errors_in_order() {
    let mut v = FakeView::standard();
    v.exporting.insert(7);
    // Already migrating comes before the NODE checks.
    assert_eq!(
        migrate_err(&v, "SLOTSRANGE 0 10 NODE short"),
        already_migrating(7)
    );
    v.exporting = SlotSet::new();
    // Overlap with an earlier group of the same command, before that group's NODE.
    assert_eq!(
        migrate_err(&v, "SLOTSRANGE 0 10 NODE <C> SLOTSRANGE 10 11 NODE short"),
        MIGRATIONS_OVERLAP
    );
    for cmd in [
        "SLOTSRANGE 0 1",
        "SLOTSRANGE 0 1 NODE",
        "SLOTSRANGE 0 1 NOPE <C>",
        "SLOTSRANGE 0 1 NODE <C> junk",
    ] {
        assert_eq!(migrate_err(&v, cmd), SYNTAX_ERROR, "{cmd}");
    }
    assert_eq!(
        migrate_err(&v, "SLOTSRANGE 0 1 NODE abc"),
        "Invalid node name: abc"
    );
    assert_eq!(
        migrate_err(&v, "SLOTSRANGE 0 1 NODE <UNKNOWN>"),
        format!("Unknown node name: {}", "d".repeat(40))
    );
    assert_eq!(
        migrate_err(&v, "SLOTSRANGE 0 1 NODE <ME>"),
        TARGET_IS_MYSELF
    );
    // A later group's error discards the whole command.
    assert_eq!(
        migrate_err(&v, "SLOTSRANGE 0 1 NODE <C> SLOTSRANGE 2 3 NODE <ME>"),
        TARGET_IS_MYSELF
    );
}

#[test]
fn migrateslots_accepts_groups_in_order() {
    let v = FakeView::standard();
    let got = migrate(
        &v,
        "slotsrange 16 20 0 3 node <C> SlotsRange 50 50 NODE <B> SLOTSRANGE 99 99 NODE <C>",
    );
    assert_eq!(
        got,
        Ok(vec![
            (vec![r(16, 20), r(0, 3)], C),
            (vec![r(50, 50)], B),
            (vec![r(99, 99)], C),
        ])
    );
}

#[test]
fn establish_node_checks() {
    let mut v = FakeView::standard();
    v.module = Some("vm".into());
    v.primary = false;
    v.manual_importing = true;
    v.manual_migrating = true;
    let cmd = "SOURCE <B> NAME <JOB> SLOTSRANGE 100 101";
    assert_eq!(establish_err(&v, cmd, false), module_unsupported("vm"));
    v.module = None;
    assert_eq!(establish_err(&v, cmd, false), ONLY_PRIMARY);
    v.primary = true;
    assert_eq!(establish_err(&v, cmd, false), MANUALLY_IMPORTED);
    v.manual_importing = false;
    assert_eq!(establish_err(&v, cmd, false), MANUALLY_MIGRATED);
    // From our primary or the AOF these checks do not apply.
    let ok = establish(&v, cmd, true).expect("tracking accepted");
    assert_eq!(ok.source, None);
    v.manual_migrating = false;
    let ok = establish(&v, cmd, false).expect("accepted");
    assert_eq!(
        ok,
        Establish {
            name: JobName(*JOB),
            source: Some(B),
            ranges: vec![r(100, 101)]
        }
    );
}

#[test]
fn establish_syntax_errors() {
    let v = FakeView::standard();
    for cmd in [
        "SOURCE <B> SOURCE <B> NAME <JOB> SLOTSRANGE 100 101",
        "SOURCE <B> NAME <JOB> NAME <JOB> SLOTSRANGE 100 101",
        "SOURCE <B> NAME <JOB> SLOTSRANGE 100 101 SLOTSRANGE 102 103",
        "SOURCE <B> NAME <JOB> SLOTSRANGE 100 101 FOO bar",
        "SOURCE short NAME <JOB> SLOTSRANGE 100 101",
        "SOURCE <B> NAME short SLOTSRANGE 100 101",
        "NAME <JOB> SLOTSRANGE 100 101 SOURCE",
        "SOURCE <B> SLOTSRANGE 100 101 NAME",
        "SOURCE <B> SLOTSRANGE 100 101",
        "SOURCE <B> NAME <JOB>",
        "NAME <JOB> SLOTSRANGE 100 101",
        "",
    ] {
        assert_eq!(establish_err(&v, cmd, false), SYNTAX_ERROR, "{cmd:?}");
    }
    // Tracking: no SOURCE needed, and a repeated one goes unnoticed (as in Valkey).
    assert!(establish(&v, "NAME <JOB> SLOTSRANGE 100 101", true).is_ok());
    assert!(establish(
        &v,
        "SOURCE <B> SOURCE <C> NAME <JOB> SLOTSRANGE 100 101",
        true
    )
    .is_ok());
    assert_eq!(
        establish_err(&v, "SOURCE short NAME <JOB> SLOTSRANGE 100 101", true),
        SYNTAX_ERROR
    );
    // Field order is free.
    let any = establish(
        &v,
        "slotsrange 100 101 150 150 name <JOB> source <B>",
        false,
    );
    assert_eq!(any.map(|e| e.ranges), Ok(vec![r(100, 101), r(150, 150)]));
}

#[test]
fn establish_validation_order() {
    let mut v = FakeView::standard();
    // Errors are reported as the fields are met.
    assert_eq!(
        establish_err(&v, "SOURCE <UNKNOWN> NAME <JOB> SLOTSRANGE 99999 1", false),
        UNKNOWN_SOURCE
    );
    assert_eq!(
        establish_err(&v, "SLOTSRANGE 99999 1 SOURCE <UNKNOWN> NAME <JOB>", false),
        INVALID_SLOT
    );
    assert_eq!(
        establish_err(&v, "SOURCE <ME> NAME <JOB> SLOTSRANGE 100 101", false),
        SOURCE_IS_MYSELF
    );
    assert_eq!(
        establish_err(&v, "SOURCE <B> NAME <JOB> SLOTSRANGE 250 251", false),
        no_node_served(250)
    );
    assert_eq!(
        establish_err(
            &v,
            "SOURCE <B> NAME <JOB> SLOTSRANGE 100 101 101 102",
            false
        ),
        range_overlap(r(101, 102), r(100, 101))
    );
    assert_eq!(
        establish_err(&v, "SOURCE <C> NAME <JOB> SLOTSRANGE 100 101", false),
        OWNERSHIP_DISAGREES
    );
    // Ownership is checked after all fields: a later syntax error wins.
    assert_eq!(
        establish_err(&v, "SOURCE <C> NAME <JOB> SLOTSRANGE 100 101 FOO", false),
        SYNTAX_ERROR
    );
    v.importing.insert(101);
    assert_eq!(
        establish_err(&v, "SOURCE <B> SLOTSRANGE 100 101 NAME short", false),
        ALREADY_IMPORTING
    );
    // Also on a replica / AOF.
    assert_eq!(
        establish_err(&v, "NAME <JOB> SLOTSRANGE 101 101", true),
        ALREADY_IMPORTING
    );
    assert_eq!(
        establish_err(&v, "NAME <JOB> SLOTSRANGE 250 250", true),
        no_node_served(250)
    );
}

fn finish(s: &str) -> Result<Finish, String> {
    let t = toks(s);
    let refs: Vec<&[u8]> = t.iter().map(|a| a.as_slice()).collect();
    Finish::parse(&refs)
}

#[test]
fn finish_parse_and_resolve() {
    assert_eq!(
        finish("STATE SUCCESS NAME <JOB>"),
        Ok(Finish {
            name: JobName(*JOB),
            state: Some(Outcome::Success),
            message: None
        })
    );
    let f = finish("name <JOB> message oops state failed").expect("ok");
    assert_eq!(f.state, Some(Outcome::Failed));
    assert_eq!(f.message.as_deref(), Some(b"oops".as_slice()));
    for cmd in [
        "STATE SUCCESS",
        "NAME <JOB>",
        "STATE SUCCESS NAME short",
        "STATE SUCCESS STATE FAILED NAME <JOB>",
        "STATE SUCCESS NAME <JOB> NAME <JOB>",
        "STATE SUCCESS NAME <JOB> MESSAGE a MESSAGE b",
        "STATE SUCCESS NAME <JOB> MESSAGE",
        "STATE SUCCESS NAME <JOB> EXTRA x",
        "STATE",
    ] {
        assert_eq!(finish(cmd), Err(SYNTAX_ERROR.into()), "{cmd}");
    }
    // A bad STATE is only reported once the job is found.
    let bogus = finish("STATE maybe NAME <JOB>").expect("parsed");
    let mut log = JobLog::new();
    assert_eq!(bogus.resolve(&log), Err(NO_SUCH_JOB.into()));
    log.push_new(crate::asm::Job::new_tracking(
        JobName(*JOB),
        vec![r(0, 0)],
        0,
    ));
    assert_eq!(bogus.resolve(&log), Err(SYNTAX_ERROR.into()));
    assert_eq!(
        finish("STATE Success NAME <JOB>").and_then(|f| f.resolve(&log)),
        Ok(Outcome::Success)
    );
}

fn sync(s: &str) -> Result<SyncSlotsCmd, String> {
    let t = toks(s);
    let refs: Vec<&[u8]> = t.iter().map(|a| a.as_slice()).collect();
    parse_syncslots(&refs)
}

fn route(s: &str, o: Origin) -> Dispatch {
    let t = toks(s);
    let refs: Vec<&[u8]> = t.iter().map(|a| a.as_slice()).collect();
    dispatch(&refs, o)
}

#[test]
fn syncslots_subcommands() {
    assert_eq!(sync("establish x"), Ok(SyncSlotsCmd::Establish));
    assert_eq!(sync("Ack"), Ok(SyncSlotsCmd::Msg(SyncMsg::Ack)));
    assert_eq!(
        sync("snapshot-eof"),
        Ok(SyncSlotsCmd::Msg(SyncMsg::SnapshotEof))
    );
    assert_eq!(
        sync("REQUEST-PAUSE"),
        Ok(SyncSlotsCmd::Msg(SyncMsg::RequestPause))
    );
    assert_eq!(sync("paused"), Ok(SyncSlotsCmd::Msg(SyncMsg::Paused)));
    assert_eq!(
        sync("request-failover"),
        Ok(SyncSlotsCmd::Msg(SyncMsg::RequestFailover))
    );
    assert_eq!(
        sync("FAILOVER-granted"),
        Ok(SyncSlotsCmd::Msg(SyncMsg::FailoverGranted))
    );
    assert_eq!(sync("CAPA a b c"), Ok(SyncSlotsCmd::Capa));
    assert!(matches!(
        sync("FINISH STATE FAILED NAME <JOB>"),
        Ok(SyncSlotsCmd::Finish(_))
    ));
    assert_eq!(sync("FINISH"), Err(SYNTAX_ERROR.into()));
    assert_eq!(sync("bogus"), Err(SYNTAX_ERROR.into()));
    assert_eq!(sync(""), Err(SYNTAX_ERROR.into()));
}

#[test]
fn syncslots_routing() {
    use Origin::*;
    assert_eq!(
        route("ESTABLISH", Client),
        Dispatch::Establish {
            tracking_only: false
        }
    );
    assert_eq!(
        route("establish", Replication),
        Dispatch::Establish {
            tracking_only: true
        }
    );
    assert_eq!(
        route("ack", Client),
        Dispatch::Error(
            "CLUSTER SYNCSLOTS ACK should only be used by slot migration clients".into()
        )
    );
    assert_eq!(
        route("paused", Client),
        Dispatch::Error(only_for_migration_clients(SyncMsg::Paused))
    );
    assert_eq!(route("capa x", Client), Dispatch::Nothing);
    assert_eq!(route("bogus", Client), Dispatch::Error(SYNTAX_ERROR.into()));
    assert_eq!(
        route("FINISH x", Client),
        Dispatch::Error(SYNTAX_ERROR.into())
    );
    assert!(matches!(
        route("FINISH STATE SUCCESS NAME <JOB>", Replication),
        Dispatch::Finish(_)
    ));
    assert_eq!(route("ack", Replication), Dispatch::Nothing);
    assert_eq!(route("bogus", Replication), Dispatch::Nothing);
    assert_eq!(
        route("ACK", Migration),
        Dispatch::Link(LinkMsg::Sync(SyncMsg::Ack))
    );
    assert_eq!(
        route("establish", Migration),
        Dispatch::Link(LinkMsg::Misplaced)
    );
    assert_eq!(
        route("finish", Migration),
        Dispatch::Link(LinkMsg::Misplaced)
    );
    assert_eq!(route("capa", Migration), Dispatch::Link(LinkMsg::Capa));
    assert_eq!(route("bogus", Migration), Dispatch::Link(LinkMsg::Unknown));
    assert_eq!(route("", Client), Dispatch::Error(SYNTAX_ERROR.into()));
}

/// Tokens that steer the parsers into their interesting branches, plus noise.
fn token() -> impl Strategy<Value = Vec<u8>> {
    let words = [
        "SLOTSRANGE",
        "slotsrange",
        "NODE",
        "SOURCE",
        "NAME",
        "STATE",
        "MESSAGE",
        "SUCCESS",
        "FAILED",
        "ESTABLISH",
        "FINISH",
        "ACK",
        "CAPA",
        "PAUSED",
        "0",
        "-0",
        "01",
        "-1",
        "16383",
        "16384",
        "99",
        "100",
        "150",
        "199",
        "200",
    ];
    prop_oneof![
        proptest::sample::select(words.to_vec()).prop_map(|w| w.as_bytes().to_vec()),
        (0u16..17000).prop_map(|n| n.to_string().into_bytes()),
        any::<i64>().prop_map(|n| n.to_string().into_bytes()),
        proptest::sample::select(vec![ME, B, C, UNKNOWN, *JOB]).prop_map(|n| n.to_vec()),
        proptest::collection::vec(any::<u8>(), 0..48),
    ]
}

proptest! {
    #[test]
    fn parsers_never_panic(tokens in proptest::collection::vec(token(), 0..14)) {
        let refs: Vec<&[u8]> = tokens.iter().map(|a| a.as_slice()).collect();
        let mut v = FakeView::standard();
        v.assign(200, 16383, C);
        v.importing.insert(150);
        v.exporting.insert(50);
        if let Ok(groups) = parse_migrateslots(&refs, &v) {
            let mut seen = SlotSet::new();
            for (ranges, target) in &groups {
                prop_assert!(*target != ME && v.knows(target));
                for r in ranges {
                    prop_assert!(r.start <= r.end && (r.end as usize) < SLOTS);
                    prop_assert!(!seen.intersects(*r));
                    prop_assert!(r.slots().all(|s| v.owner(s) == Some(ME) && s != 50));
                    seen.insert_range(*r);
                }
            }
        }
        for tracking in [false, true] {
            if let Ok(e) = parse_establish(&refs, &v, tracking) {
                prop_assert!(!e.ranges.is_empty());
                prop_assert_eq!(e.source.is_none(), tracking);
                prop_assert!(e.ranges.iter().all(|r| !r.contains(150)));
            }
        }
        let _ = parse_syncslots(&refs);
        let _ = Finish::parse(&refs);
        for o in [Origin::Client, Origin::Replication, Origin::Migration] {
            let _ = dispatch(&refs, o);
        }
        let _ = parse_ranges(&refs, &v);
    }
}
