fn main() -> anyhow::Result<()> {
    anyhow::bail!("tessera-operator: not built yet")
}
