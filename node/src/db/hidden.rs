//! Hash slots whose keys the node holds but does not show: the slots an atomic slot
//! migration is importing (Valkey 9's `CLUSTER MIGRATESLOTS`). Until the hand-off the keys
//! belong to the source; keyspace-wide reads (DBSIZE, KEYS, SCAN, RANDOMKEY, INFO keyspace)
//! skip them, and active expiry and eviction leave them alone (the source expires them and
//! sends the DEL). CLUSTER COUNTKEYSINSLOT/GETKEYSINSLOT and saves still see them.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use super::{SLOTS_PER_STRIPE, STRIPES};
use crate::slot::SLOTS;

/// A bitmap of hidden slots. Reads are lock-free; the common case (nothing hidden) costs
/// one load.
pub struct HiddenSlots {
    bits: Box<[AtomicU64]>,
    count: AtomicUsize,
}

impl Default for HiddenSlots {
    fn default() -> Self {
        HiddenSlots {
            bits: (0..SLOTS / 64).map(|_| AtomicU64::new(0)).collect(),
            count: AtomicUsize::new(0),
        }
    }
}

impl HiddenSlots {
    /// Hides `slot`; true if it was shown.
    pub fn hide(&self, slot: u16) -> bool {
        let (w, b) = Self::pos(slot);
        let was = self.bits[w].fetch_or(b, Ordering::AcqRel);
        let changed = was & b == 0;
        if changed {
            self.count.fetch_add(1, Ordering::AcqRel);
        }
        changed
    }

    /// Shows `slot` again; true if it was hidden.
    pub fn show(&self, slot: u16) -> bool {
        let (w, b) = Self::pos(slot);
        let was = self.bits[w].fetch_and(!b, Ordering::AcqRel);
        let changed = was & b != 0;
        if changed {
            self.count.fetch_sub(1, Ordering::AcqRel);
        }
        changed
    }

    #[inline]
    pub fn any(&self) -> bool {
        self.count.load(Ordering::Acquire) != 0
    }

    /// How many slots are hidden.
    pub fn len(&self) -> usize {
        self.count.load(Ordering::Acquire)
    }

    pub fn is_empty(&self) -> bool {
        !self.any()
    }

    #[inline]
    pub fn is_hidden(&self, slot: u16) -> bool {
        if !self.any() {
            return false;
        }
        let (w, b) = Self::pos(slot);
        self.bits[w].load(Ordering::Acquire) & b != 0
    }

    /// The hidden slots of stripe `stripe` as a mask over its local slot indexes (bit `l`:
    /// slot `l * STRIPES + stripe`), for loops that walk a stripe's maps.
    #[inline]
    pub fn stripe_mask(&self, stripe: usize) -> u16 {
        if !self.any() {
            return 0;
        }
        let mut m = 0u16;
        for l in 0..SLOTS_PER_STRIPE {
            if self.is_hidden((l * STRIPES + stripe) as u16) {
                m |= 1 << l;
            }
        }
        m
    }

    fn pos(slot: u16) -> (usize, u64) {
        let s = slot as usize % SLOTS;
        (s / 64, 1u64 << (s % 64))
    }
}

/// True when local slot `l` is shown under `mask` (from [`HiddenSlots::stripe_mask`]).
#[inline]
pub fn shown(mask: u16, l: usize) -> bool {
    mask & (1 << l) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hide_show_and_stripe_masks() {
        let h = HiddenSlots::default();
        assert!(!h.any());
        assert_eq!(h.stripe_mask(5), 0);
        assert!(h.hide(5));
        assert!(!h.hide(5));
        assert!(h.hide(5 + 3 * STRIPES as u16));
        assert!(h.hide(16383));
        assert_eq!(h.len(), 3);
        assert!(h.is_hidden(5) && !h.is_hidden(6));
        assert_eq!(h.stripe_mask(5), 0b1001);
        assert_eq!(h.stripe_mask(1023), 1 << 15);
        assert!(!shown(h.stripe_mask(5), 3) && shown(h.stripe_mask(5), 1));
        assert!(h.show(5));
        assert!(!h.show(5));
        assert_eq!(h.stripe_mask(5), 0b1000);
        assert!(h.show(5 + 3 * STRIPES as u16) && h.show(16383));
        assert!(!h.any() && !h.is_hidden(16383));
    }
}
