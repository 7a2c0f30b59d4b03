//! The geometry of a `convolution` ([`ConvGeo`]): its dimension numbers, window, group counts
//! and the sizes every convolution emitter and the evaluator index by, read once from the
//! module and checked.
//!
//! Invariants of a returned [`ConvGeo`]: the input, kernel and output have `2 + nsp`
//! dimensions named by `dn` (`nsp` spatial ones), the window has `nsp` entries (an empty
//! window only when `nsp == 0`), each window size equals the kernel's spatial size, strides and
//! dilations are at least 1, at most one group count exceeds 1, and the group counts divide the
//! features and batch as XLA requires (`c_in == kernel input features * fgc`, `o_ch` divisible
//! by both counts, input batch `== n_out * bgc`). Shape inference ([`crate::shape_inference`])
//! rejects a module breaking these with a located error; [`conv_geo`] checks them again so a
//! consumer handed an unverified module gets an error, never an out-of-range index.

use crate::{AttrKey, AttrValue, ConvDims, InstId, Module, WindowDim};

/// The geometry of one convolution, checked ([`conv_geo`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConvGeo {
    /// The dimension numbers.
    pub dn: ConvDims,
    /// The window, one entry per spatial dimension.
    pub window: Vec<WindowDim>,
    /// `feature_group_count` (at least 1).
    pub fgc: i64,
    /// `batch_group_count` (at least 1).
    pub bgc: i64,
    /// The output's batch size.
    pub n_out: i64,
    /// The input's features.
    pub c_in: i64,
    /// The output's features.
    pub o_ch: i64,
    /// The kernel's spatial sizes, in spatial order.
    pub k_sp: Vec<i64>,
    /// The input's spatial sizes, in spatial order.
    pub in_sp: Vec<i64>,
    /// The output's spatial sizes, in spatial order.
    pub out_sp: Vec<i64>,
}

/// Why a `convolution`'s shapes and attributes do not make a geometry ([`conv_geo`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConvGeoError {
    /// It does not have two operands.
    #[error("convolution needs two operands")]
    OperandCount,
    /// An operand or the result is not an array.
    #[error("convolution of a non-array")]
    NotArray,
    /// It has no `dim_labels`.
    #[error("convolution needs dim_labels")]
    NoDimLabels,
    /// The input, kernel and output name different numbers of spatial dimensions.
    #[error("convolution spatial dimensions do not match")]
    SpatialRanks,
    /// The labels name dimensions the operands or the result do not have.
    #[error("convolution dim_labels do not fit the operand ranks")]
    LabelsRanks,
    /// It has spatial dimensions and no window.
    #[error("convolution needs a window")]
    NoWindow,
    /// The window's rank is not the number of spatial dimensions.
    #[error("window rank does not match the spatial dimensions")]
    WindowRank,
    /// Both group counts exceed 1.
    #[error("feature_group_count and batch_group_count cannot both exceed 1")]
    BothGroupCounts,
    /// The output's features are not the kernel's output features.
    #[error("convolution output features do not match the kernel")]
    OutputFeatures,
    /// A group count does not divide the features or the batch as XLA requires.
    #[error("convolution feature or batch group sizes do not divide evenly")]
    GroupSizes,
    /// A window size is not the kernel's spatial size.
    #[error("window size does not match the kernel")]
    WindowSize,
    /// A stride or dilation is below 1.
    #[error("window strides and dilations must be positive")]
    WindowSteps,
}

impl From<ConvGeoError> for String {
    fn from(e: ConvGeoError) -> String {
        e.to_string()
    }
}

/// The geometry of `convolution` `id`, or an error saying which of its shapes and attributes
/// disagree.
pub fn conv_geo(m: &Module, id: InstId) -> Result<ConvGeo, ConvGeoError> {
    let ops = m.operands(id);
    if ops.len() != 2 {
        return Err(ConvGeoError::OperandCount);
    }
    let dims = |x: InstId| {
        m.array_shape(x)
            .map(|s| s.dims.as_ref())
            .ok_or(ConvGeoError::NotArray)
    };
    let (ld, rd, od) = (dims(ops[0])?, dims(ops[1])?, dims(id)?);
    let dn = match m.attr(id, &AttrKey::DimLabels) {
        Some(AttrValue::DimLabels(d)) => d.as_ref().clone(),
        _ => return Err(ConvGeoError::NoDimLabels),
    };
    let nsp = dn.input_spatial.len();
    if dn.kernel_spatial.len() != nsp || dn.output_spatial.len() != nsp {
        return Err(ConvGeoError::SpatialRanks);
    }
    let named = |d: &[i64], batch: i64, feature: i64, spatial: &[i64]| {
        d.len() == nsp + 2
            && [batch, feature]
                .iter()
                .chain(spatial)
                .all(|&x| x >= 0 && (x as usize) < d.len())
    };
    if !named(ld, dn.input_batch, dn.input_feature, &dn.input_spatial)
        || !named(
            rd,
            dn.kernel_input_feature,
            dn.kernel_output_feature,
            &dn.kernel_spatial,
        )
        || !named(od, dn.output_batch, dn.output_feature, &dn.output_spatial)
    {
        return Err(ConvGeoError::LabelsRanks);
    }
    let window: Vec<WindowDim> = match m.attr(id, &AttrKey::Window) {
        Some(AttrValue::Window(w)) => w.to_vec(),
        _ if nsp == 0 => Vec::new(),
        _ => return Err(ConvGeoError::NoWindow),
    };
    if window.len() != nsp {
        return Err(ConvGeoError::WindowRank);
    }
    let fgc = m
        .int_attr(id, &AttrKey::FeatureGroupCount)
        .unwrap_or(1)
        .max(1);
    let bgc = m
        .int_attr(id, &AttrKey::BatchGroupCount)
        .unwrap_or(1)
        .max(1);
    if fgc > 1 && bgc > 1 {
        return Err(ConvGeoError::BothGroupCounts);
    }
    let n_in = ld[dn.input_batch as usize];
    let c_in = ld[dn.input_feature as usize];
    let k_in = rd[dn.kernel_input_feature as usize];
    let o_ch = rd[dn.kernel_output_feature as usize];
    let n_out = od[dn.output_batch as usize];
    if od[dn.output_feature as usize] != o_ch {
        return Err(ConvGeoError::OutputFeatures);
    }
    if c_in != k_in * fgc || o_ch % fgc != 0 || o_ch % bgc != 0 || n_in != n_out * bgc {
        return Err(ConvGeoError::GroupSizes);
    }
    let k_sp: Vec<i64> = dn.kernel_spatial.iter().map(|&d| rd[d as usize]).collect();
    let in_sp: Vec<i64> = dn.input_spatial.iter().map(|&d| ld[d as usize]).collect();
    let out_sp: Vec<i64> = dn.output_spatial.iter().map(|&d| od[d as usize]).collect();
    for (w, &k) in window.iter().zip(&k_sp) {
        if w.size != k {
            return Err(ConvGeoError::WindowSize);
        }
        if w.stride < 1 || w.lhs_dilate < 1 || w.rhs_dilate < 1 {
            return Err(ConvGeoError::WindowSteps);
        }
    }
    Ok(ConvGeo {
        dn,
        window,
        fgc,
        bgc,
        n_out,
        c_in,
        o_ch,
        k_sp,
        in_sp,
        out_sp,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse_module;

    fn conv(labels: &str, lhs: &str, rhs: &str, out: &str, extra: &str) -> Module {
        let text = format!(
            "HloModule m\nENTRY e {{\n  a = {lhs} parameter(0)\n  b = {rhs} parameter(1)\n  \
             ROOT c = {out} convolution(a, b), {extra}dim_labels={labels}\n}}\n"
        );
        parse_module(&text).expect("test module parses")
    }

    fn root(m: &Module) -> InstId {
        m.root(m.entry())
    }

    #[test]
    fn reads_sizes_in_spatial_order() {
        let m = conv(
            "b01f_01io->b01f",
            "f32[2,7,5,6]",
            "f32[3,2,3,4]",
            "f32[2,3,4,4]",
            "window={size=3x2 stride=2x1}, feature_group_count=2, ",
        );
        let g = conv_geo(&m, root(&m)).expect("valid convolution");
        assert_eq!((g.n_out, g.c_in, g.o_ch, g.fgc, g.bgc), (2, 6, 4, 2, 1));
        assert_eq!(g.in_sp, vec![7, 5]);
        assert_eq!(g.k_sp, vec![3, 2]);
        assert_eq!(g.out_sp, vec![3, 4]);
        assert_eq!(g.window[0].stride, 2);
    }

    #[test]
    fn a_kernel_not_matching_the_groups_is_an_error() {
        let m = conv(
            "b01f_01io->b01f",
            "f32[2,7,5,6]",
            "f32[3,2,4,4]",
            "f32[2,5,4,4]",
            "window={size=3x2}, ",
        );
        let e = conv_geo(&m, root(&m)).expect_err("6 input features, 4 kernel features");
        assert_eq!(e, ConvGeoError::GroupSizes);
        assert!(e.to_string().contains("group sizes"), "{e}");
    }
}
