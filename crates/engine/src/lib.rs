//! The wasmtime engine configuration, in one place for both of its users: the runtime that runs
//! components and `host/build.rs`, which precompiles the bundled components into the binary. An
//! artifact only loads into an engine whose [`compatibility_hash`] is the one it was made by, so
//! the two must build their engines from this one function.

use wasmtime::{Config, Engine};

/// The largest linear memory an instance may have (a pooled slot's size): 4 GiB, all of wasm32.
pub const MAX_MEMORY_BYTES: u64 = 1 << 32;

/// Bytes of each pooled linear memory kept resident between instances (see [`config`]).
const MEMORY_KEEP_RESIDENT: usize = 2 << 20;
/// Bytes of each pooled table kept resident between instances.
const TABLE_KEEP_RESIDENT: usize = 64 << 10;

/// How the engine allocates instances, best first. It does not change what code is generated
/// (a test pins that), so an artifact made under one loads under the others.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Allocation {
    /// Pooling; slots keep their pages and are reset by copying back only the dirtied ones.
    PoolingResident,
    /// Pooling; slots are reset with madvise.
    Pooling,
    /// No pool (address space limits; or only compiling, as the build script does).
    OnDemand,
}

/// The engine configuration for `allocation`.
pub fn config(allocation: Allocation) -> Config {
    let mut c = Config::new();
    c.wasm_component_model(true);
    c.epoch_interruption(true);
    c.cranelift_opt_level(wasmtime::OptLevel::Speed);
    if allocation != Allocation::OnDemand {
        let mut p = wasmtime::PoolingAllocationConfig::default();
        p.total_component_instances(256);
        p.total_core_instances(512);
        p.total_memories(256);
        p.total_tables(512);
        p.max_memory_size(MAX_MEMORY_BYTES as usize);
        p.total_stacks(256);
        // Every call gets a fresh instance, so what a slot costs to reset dominates a trivial
        // call. Resetting with madvise throws the pages away and the next call faults them
        // back in (over half of a call's time). Instead keep up to this much of each slot
        // resident and restore only the pages the guest dirtied, found with Linux's
        // PAGEMAP_SCAN (6.7+; where it is missing, plain pooling: memset of the whole kept
        // region would be slower than madvise). The cost is RSS: at most this much per slot.
        if allocation == Allocation::PoolingResident {
            p.linear_memory_keep_resident(MEMORY_KEEP_RESIDENT);
            p.table_keep_resident(TABLE_KEEP_RESIDENT);
            p.pagemap_scan(wasmtime::Enabled::Yes);
        }
        c.allocation_strategy(wasmtime::InstanceAllocationStrategy::Pooling(p));
    }
    c
}

/// wasmtime's compatibility hash of `engine` (version, target, CPU features, settings) as a
/// number: equal for two engines exactly when an artifact of one may be loaded by the other.
pub fn compatibility_hash(engine: &Engine) -> u64 {
    use std::hash::{Hash, Hasher};
    // SipHash with fixed keys: the same value in the build script and the binary it builds.
    let mut h = std::collections::hash_map::DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut h);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocation_does_not_change_the_code() {
        let on_demand = compatibility_hash(&Engine::new(&config(Allocation::OnDemand)).unwrap());
        for a in [Allocation::Pooling, Allocation::PoolingResident] {
            let Ok(engine) = Engine::new(&config(a)) else { continue };
            assert_eq!(compatibility_hash(&engine), on_demand, "{a:?}");
        }
    }
}
