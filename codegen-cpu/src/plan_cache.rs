//! [`PlanCache`]: the plan of each fused computation of one module, made once and shared by
//! the buffer assignment (which asks how a fusion runs, and about its steps, many times) and
//! lowering (which emits what the plans say).
//!
//! Invariants: a cache belongs to one module state. Plans name instructions, so the cache is
//! cleared ([`PlanCache::clear`]) before anything rewrites the module it was filled from. A
//! computation that cannot be planned is remembered as such; asking for its plan with a
//! reason ([`PlanCache::plan_or_reason`]) plans it again to get the reason.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axle_ir::{CompId, Module};

use crate::error::R;
use crate::fused::{plan_fusion, FusionPlan};

/// The fusion plans of one module (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct PlanCache {
    plans: Mutex<HashMap<CompId, Option<Arc<FusionPlan>>>>,
}

impl PlanCache {
    /// The plan of fused computation `c` of `m` (`None`: it cannot be planned).
    pub(crate) fn plan(&self, m: &Module, c: CompId) -> Option<Arc<FusionPlan>> {
        let mut plans = self.plans.lock().unwrap_or_else(|e| e.into_inner());
        plans
            .entry(c)
            .or_insert_with(|| plan_fusion(m, c).ok().map(Arc::new))
            .clone()
    }

    /// The plan of fused computation `c` of `m`, or why it cannot be planned.
    pub(crate) fn plan_or_reason(&self, m: &Module, c: CompId) -> R<Arc<FusionPlan>> {
        match self.plan(m, c) {
            Some(p) => Ok(p),
            None => plan_fusion(m, c).map(Arc::new),
        }
    }

    /// The plan of `c` if it was planned already and can be planned.
    pub(crate) fn planned(&self, c: CompId) -> Option<Arc<FusionPlan>> {
        let plans = self.plans.lock().unwrap_or_else(|e| e.into_inner());
        plans.get(&c).cloned().flatten()
    }

    /// Forgets every plan (the module is about to change).
    pub(crate) fn clear(&self) {
        self.plans.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }
}
