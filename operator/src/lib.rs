//! tessera-operator: reconciles RedisCluster resources into StatefulSets and a live cluster.

pub mod topology;
