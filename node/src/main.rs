fn main() -> anyhow::Result<()> {
    anyhow::bail!("tessera-node: not built yet")
}
