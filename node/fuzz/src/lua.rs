//! The conversions between command replies and Lua values (redis.call's result, a
//! script's reply).

use tessera_node::script::convert::fuzz_roundtrip;

/// One reply read into the Lua value a script would get, written back as a script's reply
/// in RESP2 and RESP3 (see `fuzz_roundtrip`). After that first conversion the RESP2 reply
/// is a fixed point: reading and writing it again gives the same bytes.
pub fn lua_convert(data: &[u8]) {
    let lua = mlua::Lua::new();
    let Some((resp2, _resp3)) = fuzz_roundtrip(&lua, data) else {
        return;
    };
    if let Some((again, _)) = fuzz_roundtrip(&lua, &resp2) {
        assert!(
            again == resp2,
            "a script reply changed when read back: {:?} became {:?}",
            String::from_utf8_lossy(&resp2)
                .chars()
                .take(300)
                .collect::<String>(),
            String::from_utf8_lossy(&again)
                .chars()
                .take(300)
                .collect::<String>()
        );
    }
}
