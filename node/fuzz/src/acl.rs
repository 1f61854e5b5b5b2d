//! ACL files (`aclfile`, ACL LOAD) and the ACL SETUSER rule grammar they are made of.

use tessera_node::acl::{file, Env};

/// An ACL file as ACL LOAD reads it. What loads must survive ACL SAVE and a reload with
/// every user described the same (a saved file that no longer loads, or loads into other
/// rules, would lock users out at the next start).
pub fn acl_file(data: &[u8]) {
    let cat = tessera_node::standalone_acl_catalog();
    for allchannels in [false, true] {
        let env = Env {
            catalog: cat,
            pubsub_allchannels: allchannels,
        };
        let Ok(loaded) = file::parse(data, "fuzz.acl", env) else {
            continue;
        };
        let saved = file::render(
            loaded
                .users
                .iter()
                .map(|(n, u)| (n.as_slice(), u))
                .chain(std::iter::once((&b"default"[..], &loaded.default))),
            cat,
        );
        let again = match file::parse(&saved, "saved.acl", env) {
            Ok(a) => a,
            Err(e) => panic!(
                "the saved file does not load: {e}\n{}",
                String::from_utf8_lossy(&saved)
            ),
        };
        assert_eq!(
            again.default.describe(cat),
            loaded.default.describe(cat),
            "default changed by ACL SAVE and LOAD"
        );
        assert_eq!(
            again.users.len(),
            loaded.users.len(),
            "users lost by ACL SAVE"
        );
        for (name, u) in &loaded.users {
            let back = again.users.get(name).unwrap_or_else(|| {
                panic!("user {} lost by ACL SAVE", String::from_utf8_lossy(name))
            });
            assert_eq!(
                back.describe(cat),
                u.describe(cat),
                "user {} changed by ACL SAVE and LOAD",
                String::from_utf8_lossy(name)
            );
        }
    }
}
