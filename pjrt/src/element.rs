//! The correspondence between PJRT's `PJRT_Buffer_Type` and Axle's [`ElementType`]: a bijection
//! on the types both have; `TOKEN` (which Axle has no buffers of) and Axle's types newer than the
//! C API (f8e4m3, f8e3m4, f8e8m0fnu, f4e2m1fn) are errors naming them.

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
    (
        PJRT_Buffer_Type_PJRT_Buffer_Type_F8E5M2,
        ElementType::F8E5M2,
    ),
    (
        PJRT_Buffer_Type_PJRT_Buffer_Type_F8E4M3FN,
        ElementType::F8E4M3FN,
    ),
    (
        PJRT_Buffer_Type_PJRT_Buffer_Type_F8E4M3B11FNUZ,
        ElementType::F8E4M3B11FNUZ,
    ),
    (
        PJRT_Buffer_Type_PJRT_Buffer_Type_F8E5M2FNUZ,
        ElementType::F8E5M2FNUZ,
    ),
    (
        PJRT_Buffer_Type_PJRT_Buffer_Type_F8E4M3FNUZ,
        ElementType::F8E4M3FNUZ,
    ),
];

/// Axle's types that the C API of 0.54 has no code for (later versions add them).
#[cfg(test)]
const WITHOUT_CODE: &[ElementType] = &[
    ElementType::F8E4M3,
    ElementType::F8E3M4,
    ElementType::F8E8M0FNU,
    ElementType::F4E2M1FN,
];

/// Axle's element type for a PJRT buffer type.
pub fn from_pjrt(t: PJRT_Buffer_Type) -> PluginResult<ElementType> {
    PAIRS
        .iter()
        .find(|(p, _)| *p == t)
        .map(|(_, e)| *e)
        .ok_or_else(|| {
            if t == PJRT_Buffer_Type_PJRT_Buffer_Type_TOKEN {
                PluginError::unimplemented("axle: token buffers are not supported")
            } else {
                PluginError::invalid(format!("axle: unknown PJRT buffer type {t}"))
            }
        })
}

/// PJRT's buffer type for an Axle element type; types newer than the C API are an error
/// naming them.
pub fn to_pjrt(t: ElementType) -> PluginResult<PJRT_Buffer_Type> {
    PAIRS
        .iter()
        .find(|(_, e)| *e == t)
        .map(|(p, _)| *p)
        .ok_or_else(|| {
            PluginError::unimplemented(format!(
                "axle: element type {} has no code in PJRT C API 0.{PJRT_API_MINOR}",
                t.name()
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_axle_type_maps_there_and_back() {
        for &t in ElementType::ALL {
            match to_pjrt(t) {
                Ok(p) => assert_eq!(from_pjrt(p).unwrap(), t),
                Err(e) => {
                    assert!(WITHOUT_CODE.contains(&t), "{t:?}");
                    assert!(e.message.contains(t.name()), "{e:?}");
                }
            }
        }
        assert!(from_pjrt(PJRT_Buffer_Type_PJRT_Buffer_Type_TOKEN).is_err());
        assert!(from_pjrt(PJRT_Buffer_Type_PJRT_Buffer_Type_INVALID).is_err());
    }
}
