//! The correspondence between PJRT's `PJRT_Buffer_Type` and Axle's [`ElementType`]: a bijection
//! on the types both have; the float8 types and `TOKEN`, which Axle lacks, are errors naming them.

use axle::ir::ElementType;
use pjrt_sys::*;

use crate::error::{PluginError, PluginResult};

/// Every pair, PJRT's code first.
const PAIRS: &[(PJRT_Buffer_Type, ElementType)] = &[
    (PJRT_Buffer_Type_PJRT_Buffer_Type_PRED, ElementType::Pred),
    (PJRT_Buffer_Type_PJRT_Buffer_Type_S2, ElementType::S2),
    (PJRT_Buffer_Type_PJRT_Buffer_Type_S4, ElementType::S4),
    (PJRT_Buffer_Type_PJRT_Buffer_Type_S8, ElementType::S8),
    (PJRT_Buffer_Type_PJRT_Buffer_Type_S16, ElementType::S16),
    (PJRT_Buffer_Type_PJRT_Buffer_Type_S32, ElementType::S32),
    (PJRT_Buffer_Type_PJRT_Buffer_Type_S64, ElementType::S64),
    (PJRT_Buffer_Type_PJRT_Buffer_Type_U2, ElementType::U2),
    (PJRT_Buffer_Type_PJRT_Buffer_Type_U4, ElementType::U4),
    (PJRT_Buffer_Type_PJRT_Buffer_Type_U8, ElementType::U8),
    (PJRT_Buffer_Type_PJRT_Buffer_Type_U16, ElementType::U16),
    (PJRT_Buffer_Type_PJRT_Buffer_Type_U32, ElementType::U32),
    (PJRT_Buffer_Type_PJRT_Buffer_Type_U64, ElementType::U64),
    (PJRT_Buffer_Type_PJRT_Buffer_Type_F16, ElementType::F16),
    (PJRT_Buffer_Type_PJRT_Buffer_Type_BF16, ElementType::BF16),
    (PJRT_Buffer_Type_PJRT_Buffer_Type_F32, ElementType::F32),
    (PJRT_Buffer_Type_PJRT_Buffer_Type_F64, ElementType::F64),
    (PJRT_Buffer_Type_PJRT_Buffer_Type_C64, ElementType::C64),
    (PJRT_Buffer_Type_PJRT_Buffer_Type_C128, ElementType::C128),
];

/// Axle's element type for a PJRT buffer type.
pub fn from_pjrt(t: PJRT_Buffer_Type) -> PluginResult<ElementType> {
    PAIRS
        .iter()
        .find(|(p, _)| *p == t)
        .map(|(_, e)| *e)
        .ok_or_else(|| {
            let name = match t {
                PJRT_Buffer_Type_PJRT_Buffer_Type_F8E5M2 => "f8e5m2",
                PJRT_Buffer_Type_PJRT_Buffer_Type_F8E4M3FN => "f8e4m3fn",
                PJRT_Buffer_Type_PJRT_Buffer_Type_F8E4M3B11FNUZ => "f8e4m3b11fnuz",
                PJRT_Buffer_Type_PJRT_Buffer_Type_F8E5M2FNUZ => "f8e5m2fnuz",
                PJRT_Buffer_Type_PJRT_Buffer_Type_F8E4M3FNUZ => "f8e4m3fnuz",
                PJRT_Buffer_Type_PJRT_Buffer_Type_TOKEN => "token",
                _ => "",
            };
            if name.is_empty() {
                PluginError::invalid(format!("axle: unknown PJRT buffer type {t}"))
            } else {
                PluginError::unimplemented(format!("axle: element type {name} is not supported"))
            }
        })
}

/// PJRT's buffer type for an Axle element type (every Axle type has one).
pub fn to_pjrt(t: ElementType) -> PJRT_Buffer_Type {
    PAIRS
        .iter()
        .find(|(_, e)| *e == t)
        .map_or(PJRT_Buffer_Type_PJRT_Buffer_Type_INVALID, |(p, _)| *p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_axle_type_maps_there_and_back() {
        for &t in ElementType::ALL {
            let p = to_pjrt(t);
            assert_ne!(p, PJRT_Buffer_Type_PJRT_Buffer_Type_INVALID, "{t:?}");
            assert_eq!(from_pjrt(p).unwrap(), t);
        }
        let e = from_pjrt(PJRT_Buffer_Type_PJRT_Buffer_Type_F8E5M2).unwrap_err();
        assert!(e.message.contains("f8e5m2"), "{e:?}");
    }
}
