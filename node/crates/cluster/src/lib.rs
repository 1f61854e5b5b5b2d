//! Redis Cluster bus, state and CLUSTER commands.
