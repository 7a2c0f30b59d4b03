//! Instruction attributes between the IR's typed [`Attr`] lists and the fields of
//! `HloInstructionProto`.
//!
//! Invariants:
//! - [`from_proto`] builds the attributes XLA's text printer shows for an instruction: a field
//!   becomes an attribute when the printer would print it (dimension numbers of dots, gathers
//!   and scatters with their batch dimensions only when non-empty, booleans only when true,
//!   group counts only above 1, a comparison's `type` only when it differs from the default
//!   for its operands), so reading XLA's own protos gives what parsing XLA's text gives.
//! - [`to_proto`] is its inverse on every attribute list the text parser builds whose values
//!   are not XLA's defaults spelled out; the writer checks `from_proto(to_proto(a)) == a` for
//!   every instruction and reports any other list as unrepresentable, never writing a proto
//!   that reads back differently.
//! - Called computations are `called_computation_ids` in XLA's order for the opcode (`while`:
//!   body then condition; `select-and-scatter`: select then scatter; `conditional`: its
//!   branches); the caller maps ids, this file sees [`CompId`]s.
//! - An attribute the IR keeps as verbatim text travels in its proto field when
//!   [`crate::verbatim`] renders that field back to the same text, and otherwise as the
//!   frontend attribute `axle.attr.KEY` holding the text, which [`from_proto`] turns back into
//!   the attribute (and which no producer but this crate writes).

use std::collections::HashMap;

use axle_ir::collective::{IotaGroups, ReplicaGroups};
use axle_ir::{
    Attr, AttrKey, AttrValue, CompId, ComparisonDirection, ComparisonType, ConvDims, ElementType,
    FusionKind, InstId, Opcode, WindowDim,
};
use pjrt_sys::protos::xla::{
    hlo_instruction_proto::SliceDimensions, padding_config::PaddingConfigDimension,
    CholeskyOptions, CollectiveDeviceListProto, ConvolutionDimensionNumbers, DotDimensionNumbers,
    FrontendAttributes, GatherDimensionNumbers, HloInstructionProto, IotaReplicaGroupListProto,
    PaddingConfig, PrecisionConfig, ReplicaGroup, ScatterDimensionNumbers, SourceTarget,
    TriangularSolveOptions, Window, WindowDimension,
};

use crate::verbatim;

/// The prefix of the frontend attributes that carry attribute text verbatim.
pub const VERBATIM_PREFIX: &str = "axle.attr.";

/// What [`from_proto`] needs beyond the instruction's own fields.
pub struct ReadCx<'a> {
    /// The computations `called_computation_ids` name, in order.
    pub called: &'a [CompId],
    /// The instructions `control_predecessor_ids` name, in order.
    pub control: &'a [InstId],
    /// The element type of operand 0 when it is an array (a `compare`'s default type and a
    /// `conditional`'s predicate form depend on it), and whether it is a scalar.
    pub operand0: Option<(ElementType, bool)>,
}

/// XLA's `PrecisionConfig.Algorithm`, indexed by the enum's number (`xla_data.proto`: 13 is
/// `ALG_DOT_BF16_BF16_F32_X9`, added after `ALG_DOT_F64_F64_F64`).
const DOT_ALGORITHMS: &[&str] = &[
    "unset",
    "dot_any_f8_any_f8_f32",
    "dot_any_f8_any_f8_f32_fast_accum",
    "dot_f16_f16_f16",
    "dot_f16_f16_f32",
    "dot_bf16_bf16_bf16",
    "dot_bf16_bf16_f32",
    "dot_bf16_bf16_f32_x3",
    "dot_bf16_bf16_f32_x6",
    "dot_tf32_tf32_f32",
    "dot_tf32_tf32_f32_x3",
    "dot_f32_f32_f32",
    "dot_f64_f64_f64",
    "dot_bf16_bf16_f32_x9",
];
const RNG_ALGORITHMS: &[&str] = &["rng_default", "rng_three_fry", "rng_philox"];
const DISTRIBUTIONS: &[&str] = &["rng_invalid", "rng_uniform", "rng_normal"];
const FFT_TYPES: &[&str] = &["FFT", "IFFT", "RFFT", "IRFFT"];
const TRANSPOSES: &[&str] = &["TRANSPOSE_INVALID", "NO_TRANSPOSE", "TRANSPOSE", "ADJOINT"];

fn name_of(table: &[&'static str], v: i32, what: &str) -> Result<&'static str, String> {
    usize::try_from(v)
        .ok()
        .and_then(|i| table.get(i).copied())
        .ok_or_else(|| format!("unknown {what} {v}"))
}

fn number_of(table: &[&str], s: &str, what: &str) -> Result<i32, String> {
    table
        .iter()
        .position(|&t| t == s)
        .map(|i| i as i32)
        .ok_or_else(|| format!("{what} '{s}' has no HloModuleProto form"))
}

/// The attribute key naming a single called computation of `op`.
fn calls_key(op: Opcode) -> AttrKey {
    match op {
        Opcode::Fusion | Opcode::AsyncStart | Opcode::AsyncUpdate | Opcode::AsyncDone => {
            AttrKey::Calls
        }
        _ => AttrKey::ToApply,
    }
}

/// The device groups, pairs and flags of a collective, as XLA prints them: `replica_groups`
/// (explicit lists, `{}` for all devices, or the iota form `[g,s]<=[dims]T(perm)`, with an
/// identity permutation left out), `use_global_device_ids`, `source_target_pairs`,
/// `constrain_layout`.
fn collective_attrs(p: &HloInstructionProto, op: Opcode) -> Vec<Attr> {
    use Opcode::*;
    let mut out = Vec::new();
    if matches!(
        op,
        AllReduce
            | AllReduceStart
            | AllGather
            | AllGatherStart
            | ReduceScatter
            | AllToAll
            | RaggedAllToAll
            | CollectiveBroadcast
    ) {
        let list = p.collective_device_list.as_ref();
        #[allow(deprecated)] // Older writers (and XLA's text path) still fill it.
        let groups = if !p.replica_groups.is_empty() {
            Some(&p.replica_groups)
        } else {
            list.map(|l| &l.replica_groups).filter(|g| !g.is_empty())
        };
        let value = match (
            groups,
            list.and_then(|l| l.iota_replica_group_list.as_ref()),
        ) {
            (Some(g), _) => ReplicaGroups::List(
                g.iter()
                    .map(|r| r.replica_ids.clone().into_boxed_slice())
                    .collect(),
            ),
            (None, Some(iota)) => {
                let perm: Box<[i64]> = iota.iota_transpose_perm.iter().map(|&x| x as i64).collect();
                let identity = perm.iter().enumerate().all(|(k, &x)| k as i64 == x);
                ReplicaGroups::Iota(IotaGroups {
                    num_groups: iota.num_replica_groups,
                    group_size: iota.num_devices_per_group,
                    reshape_dims: iota.iota_reshape_dims.clone().into(),
                    transpose: (!identity).then_some(perm),
                })
            }
            (None, None) => ReplicaGroups::List(Box::new([])),
        };
        out.push((
            AttrKey::ReplicaGroups,
            AttrValue::ReplicaGroups(Box::new(value)),
        ));
    }
    if matches!(op, CollectivePermute | CollectivePermuteStart) {
        out.push((
            AttrKey::SourceTargetPairs,
            AttrValue::Pairs(
                p.source_target_pairs
                    .iter()
                    .map(|st| [st.source, st.target])
                    .collect(),
            ),
        ));
    }
    if p.use_global_device_ids {
        out.push((AttrKey::UseGlobalDeviceIds, AttrValue::Bool(true)));
    }
    if p.constrain_layout {
        out.push((AttrKey::ConstrainLayout, AttrValue::Bool(true)));
    }
    out
}

/// Writes typed `replica_groups` into `p`'s collective device list (`{}` leaves it empty).
fn replica_groups_to_proto(g: &ReplicaGroups, p: &mut HloInstructionProto) -> Result<(), String> {
    p.collective_device_list = match g {
        ReplicaGroups::List(l) if l.is_empty() => None,
        ReplicaGroups::List(l) => Some(CollectiveDeviceListProto {
            replica_groups: l
                .iter()
                .map(|g| ReplicaGroup {
                    replica_ids: g.to_vec(),
                })
                .collect(),
            iota_replica_group_list: None,
        }),
        ReplicaGroups::Iota(i) => {
            let int32 = |x: i64| {
                i32::try_from(x)
                    .map_err(|_| format!("replica_groups={g}: {x} does not fit in 32 bits"))
            };
            Some(CollectiveDeviceListProto {
                replica_groups: Vec::new(),
                iota_replica_group_list: Some(IotaReplicaGroupListProto {
                    num_replica_groups: i.num_groups,
                    num_devices_per_group: i.group_size,
                    iota_reshape_dims: i.reshape_dims.to_vec(),
                    iota_transpose_perm: match &i.transpose {
                        Some(t) => t.iter().map(|&x| int32(x)).collect::<Result<_, _>>()?,
                        None => Vec::new(),
                    },
                }),
            })
        }
    };
    Ok(())
}

/// The attributes of instruction `p` with opcode `op`, as the text parser would build them
/// from XLA's printed text.
pub fn from_proto(p: &HloInstructionProto, op: Opcode, cx: &ReadCx) -> Result<Vec<Attr>, String> {
    use AttrKey as K;
    use AttrValue as V;
    let mut a: Vec<Attr> = Vec::new();
    let ints = |v: &[i64]| V::Ints(v.into());
    match op {
        Opcode::Parameter => {
            if p.parameter_number < 0 {
                return Err(format!("negative parameter number {}", p.parameter_number));
            }
            a.push((K::ParameterNumber, V::Int(p.parameter_number)));
        }
        Opcode::GetTupleElement => a.push((K::Index, V::Int(p.tuple_index))),
        Opcode::Iota => match p.dimensions[..] {
            [d] => a.push((K::IotaDimension, V::Int(d))),
            _ => {
                return Err(format!(
                    "iota with {} dimensions, not 1",
                    p.dimensions.len()
                ))
            }
        },
        _ => {}
    }
    let prints_dims = matches!(
        op,
        Opcode::Broadcast
            | Opcode::Transpose
            | Opcode::Reduce
            | Opcode::Reverse
            | Opcode::Map
            | Opcode::Concatenate
            | Opcode::Sort
    );
    if op != Opcode::Iota && (prints_dims || !p.dimensions.is_empty()) {
        a.push((K::Dimensions, ints(&p.dimensions)));
    }
    if op == Opcode::Slice || !p.slice_dimensions.is_empty() {
        let s = p
            .slice_dimensions
            .iter()
            .map(|d| [d.start, d.limit, d.stride])
            .collect();
        a.push((K::Slice, V::Slice(s)));
    }
    if op == Opcode::DynamicSlice || !p.dynamic_slice_sizes.is_empty() {
        a.push((K::DynamicSliceSizes, ints(&p.dynamic_slice_sizes)));
    }
    if op == Opcode::Pad || p.padding_config.is_some() {
        let pad = p
            .padding_config
            .iter()
            .flat_map(|c| &c.dimensions)
            .map(|d| [d.edge_padding_low, d.edge_padding_high, d.interior_padding])
            .collect();
        a.push((K::Padding, V::Padding(pad)));
    }
    if let Some(w) = &p.window {
        let windowed = matches!(
            op,
            Opcode::ReduceWindow | Opcode::SelectAndScatter | Opcode::Convolution
        );
        if windowed || !w.dimensions.is_empty() {
            let dims = w
                .dimensions
                .iter()
                .map(|d| WindowDim {
                    size: d.size,
                    stride: d.stride,
                    pad_lo: d.padding_low,
                    pad_hi: d.padding_high,
                    lhs_dilate: d.base_dilation,
                    rhs_dilate: d.window_dilation,
                    reversal: d.window_reversal,
                })
                .collect();
            a.push((K::Window, V::Window(dims)));
        }
    }
    if let Some(c) = &p.convolution_dimension_numbers {
        a.push((
            K::DimLabels,
            V::DimLabels(Box::new(ConvDims {
                input_batch: c.input_batch_dimension,
                input_feature: c.input_feature_dimension,
                input_spatial: c.input_spatial_dimensions.clone().into(),
                kernel_input_feature: c.kernel_input_feature_dimension,
                kernel_output_feature: c.kernel_output_feature_dimension,
                kernel_spatial: c.kernel_spatial_dimensions.clone().into(),
                output_batch: c.output_batch_dimension,
                output_feature: c.output_feature_dimension,
                output_spatial: c.output_spatial_dimensions.clone().into(),
            })),
        ));
    }
    if p.feature_group_count > 1 {
        a.push((K::FeatureGroupCount, V::Int(p.feature_group_count)));
    }
    if p.batch_group_count > 1 {
        a.push((K::BatchGroupCount, V::Int(p.batch_group_count)));
    }
    if let Some(d) = &p.dot_dimension_numbers {
        if !d.lhs_batch_dimensions.is_empty() {
            a.push((K::LhsBatchDims, ints(&d.lhs_batch_dimensions)));
        }
        a.push((K::LhsContractingDims, ints(&d.lhs_contracting_dimensions)));
        if !d.rhs_batch_dimensions.is_empty() {
            a.push((K::RhsBatchDims, ints(&d.rhs_batch_dimensions)));
        }
        a.push((K::RhsContractingDims, ints(&d.rhs_contracting_dimensions)));
    }
    if let Some(g) = &p.gather_dimension_numbers {
        a.push((K::OffsetDims, ints(&g.offset_dims)));
        a.push((K::CollapsedSliceDims, ints(&g.collapsed_slice_dims)));
        a.push((K::StartIndexMap, ints(&g.start_index_map)));
        if !g.operand_batching_dims.is_empty() {
            a.push((K::OperandBatchingDims, ints(&g.operand_batching_dims)));
        }
        if !g.start_indices_batching_dims.is_empty() {
            a.push((
                K::StartIndicesBatchingDims,
                ints(&g.start_indices_batching_dims),
            ));
        }
        a.push((K::IndexVectorDim, V::Int(g.index_vector_dim)));
    }
    if op == Opcode::Gather || !p.gather_slice_sizes.is_empty() {
        a.push((K::SliceSizes, ints(&p.gather_slice_sizes)));
    }
    if let Some(s) = &p.scatter_dimension_numbers {
        a.push((K::UpdateWindowDims, ints(&s.update_window_dims)));
        a.push((K::InsertedWindowDims, ints(&s.inserted_window_dims)));
        a.push((
            K::ScatterDimsToOperandDims,
            ints(&s.scatter_dims_to_operand_dims),
        ));
        if !s.input_batching_dims.is_empty() {
            a.push((K::InputBatchingDims, ints(&s.input_batching_dims)));
        }
        if !s.scatter_indices_batching_dims.is_empty() {
            a.push((
                K::ScatterIndicesBatchingDims,
                ints(&s.scatter_indices_batching_dims),
            ));
        }
        a.push((K::IndexVectorDim, V::Int(s.index_vector_dim)));
    }
    if p.indices_are_sorted {
        a.push((K::IndicesAreSorted, V::Bool(true)));
    }
    if p.unique_indices {
        a.push((K::UniqueIndices, V::Bool(true)));
    }
    if op == Opcode::Compare || !p.comparison_direction.is_empty() {
        let d = ComparisonDirection::from_name(&p.comparison_direction)
            .ok_or_else(|| format!("unknown comparison direction '{}'", p.comparison_direction))?;
        a.push((K::Direction, V::Direction(d)));
    }
    if !p.comparison_type.is_empty() {
        let t = ComparisonType::from_name(&p.comparison_type)
            .ok_or_else(|| format!("unknown comparison type '{}'", p.comparison_type))?;
        let default = cx.operand0.map(|(ty, _)| ComparisonType::default_for(ty));
        if default != Some(t) {
            a.push((K::Type, V::CmpType(t)));
        }
    }
    if op == Opcode::TopK {
        a.push((K::K, V::Int(p.k)));
        a.push((K::Largest, V::Bool(p.largest)));
    }
    if p.is_stable {
        a.push((K::IsStable, V::Bool(true)));
    }
    if op == Opcode::ReducePrecision {
        a.push((K::ExponentBits, V::Int(p.exponent_bits.into())));
        a.push((K::MantissaBits, V::Int(p.mantissa_bits.into())));
    }
    if op == Opcode::Rng {
        let d = name_of(DISTRIBUTIONS, p.distribution, "random distribution")?;
        a.push((K::Distribution, V::Ident(d.into())));
    }
    if op == Opcode::RngBitGenerator {
        let alg = name_of(RNG_ALGORITHMS, p.rng_algorithm, "random algorithm")?;
        a.push((K::Algorithm, V::Ident(alg.into())));
    }
    if let Some(pc) = &p.precision_config {
        if pc.algorithm != 0 {
            let alg = name_of(DOT_ALGORITHMS, pc.algorithm, "dot algorithm")?;
            a.push((K::Algorithm, V::Ident(alg.into())));
        }
        if let Some(t) = verbatim::render_precision(&pc.operand_precision) {
            a.push((K::Other("operand_precision".into()), V::Raw(t.into())));
        }
    }
    if op == Opcode::Fft {
        let t = name_of(FFT_TYPES, p.fft_type, "FFT type")?;
        a.push((K::FftType, V::Ident(t.into())));
        a.push((K::FftLength, ints(&p.fft_length)));
    }
    if let Some(t) = &p.triangular_solve_options {
        if t.left_side {
            a.push((K::LeftSide, V::Bool(true)));
        }
        if t.lower {
            a.push((K::Lower, V::Bool(true)));
        }
        if t.unit_diagonal {
            a.push((K::UnitDiagonal, V::Bool(true)));
        }
        let tr = name_of(TRANSPOSES, t.transpose_a, "transpose")?;
        a.push((K::TransposeA, V::Ident(tr.into())));
    }
    if p.cholesky_options.as_ref().is_some_and(|c| c.lower) {
        a.push((K::Lower, V::Bool(true)));
    }
    if op == Opcode::Fusion || !p.fusion_kind.is_empty() {
        let k = FusionKind::from_name(&p.fusion_kind)
            .ok_or_else(|| format!("unknown fusion kind '{}'", p.fusion_kind))?;
        a.push((K::Kind, V::FusionKind(k)));
    }
    if op == Opcode::CustomCall {
        a.push((
            K::CustomCallTarget,
            V::Str(p.custom_call_target.as_str().into()),
        ));
    }
    called_from_proto(op, cx, &mut a)?;
    if !cx.control.is_empty() {
        a.push((K::ControlPredecessors, V::Insts(cx.control.into())));
    }
    if let Some(t) = p.sharding.as_ref().and_then(verbatim::render_sharding) {
        a.push((K::Sharding, V::Raw(t.into())));
    }
    if let Some(t) = p.metadata.as_ref().and_then(verbatim::render_metadata) {
        a.push((K::Metadata, V::Raw(t.into())));
    }
    if let Some(t) = verbatim::render_backend_config(&p.backend_config) {
        a.push((K::BackendConfig, V::Raw(t.into())));
    }
    if p.channel_id != 0 {
        a.push((K::ChannelId, V::Int(p.channel_id)));
    }
    a.extend(collective_attrs(p, op));
    if p.custom_call_has_side_effect {
        a.push((
            K::Other("custom_call_has_side_effect".into()),
            V::Raw("true".into()),
        ));
    }
    if let Some(fa) = &p.frontend_attributes {
        let (ours, theirs): (Vec<_>, Vec<_>) = fa
            .map
            .iter()
            .partition(|(k, _)| k.starts_with(VERBATIM_PREFIX));
        if let Some(t) = verbatim::render_frontend_attributes(theirs) {
            a.push((K::FrontendAttributes, V::Raw(t.into())));
        }
        for (k, v) in ours {
            let key = AttrKey::from_name(&k[VERBATIM_PREFIX.len()..]);
            if key.kind() != axle_ir::attrs::AttrKind::Raw || a.iter().any(|(x, _)| *x == key) {
                return Err(format!(
                    "frontend attribute '{k}' names an attribute kept otherwise"
                ));
            }
            a.push((key, V::Raw(v.as_str().into())));
        }
    }
    a.sort_by(|x, y| x.0.cmp(&y.0));
    Ok(a)
}

fn called_from_proto(op: Opcode, cx: &ReadCx, a: &mut Vec<Attr>) -> Result<(), String> {
    use AttrKey as K;
    use AttrValue as V;
    let c = cx.called;
    let want = |n: usize| {
        if c.len() == n {
            Ok(())
        } else {
            Err(format!(
                "{} calls {} computations, not {n}",
                op.name(),
                c.len()
            ))
        }
    };
    match op {
        Opcode::While => {
            want(2)?;
            a.push((K::Condition, V::Comp(c[1])));
            a.push((K::Body, V::Comp(c[0])));
        }
        Opcode::SelectAndScatter => {
            want(2)?;
            a.push((K::Select, V::Comp(c[0])));
            a.push((K::Scatter, V::Comp(c[1])));
        }
        Opcode::Conditional => {
            if c.len() == 2 && cx.operand0 == Some((ElementType::Pred, true)) {
                a.push((K::TrueComputation, V::Comp(c[0])));
                a.push((K::FalseComputation, V::Comp(c[1])));
            } else {
                a.push((K::BranchComputations, V::Comps(c.into())));
            }
        }
        Opcode::CustomCall if !c.is_empty() => a.push((K::CalledComputations, V::Comps(c.into()))),
        _ if c.len() == 1 => a.push((calls_key(op), V::Comp(c[0]))),
        _ if !c.is_empty() => a.push((K::CalledComputations, V::Comps(c.into()))),
        _ => {}
    }
    Ok(())
}

/// Sets the fields of `p` that attributes `attrs` of an instruction with opcode `op` give;
/// `comp` and `inst` map the IR's ids to the proto's.
pub fn to_proto(
    op: Opcode,
    attrs: &[Attr],
    p: &mut HloInstructionProto,
    comp: &dyn Fn(CompId) -> i64,
    inst: &dyn Fn(InstId) -> i64,
) -> Result<(), String> {
    use AttrKey as K;
    use AttrValue as V;
    let mut fa: HashMap<String, String> = HashMap::new();
    let mut precision: Option<PrecisionConfig> = None;
    let mut called: Vec<(AttrKey, Vec<CompId>)> = Vec::new();
    for (k, v) in attrs {
        let int32 = |x: i64| {
            i32::try_from(x).map_err(|_| format!("{}={x} does not fit in 32 bits", k.name()))
        };
        match (k, v) {
            (K::ParameterNumber, V::Int(x)) => p.parameter_number = *x,
            (K::Index, V::Int(x)) => p.tuple_index = *x,
            (K::IotaDimension, V::Int(x)) => p.dimensions = vec![*x],
            (K::Dimensions, V::Ints(x)) => p.dimensions = x.to_vec(),
            (K::Slice, V::Slice(s)) => {
                p.slice_dimensions = s
                    .iter()
                    .map(|&[start, limit, stride]| SliceDimensions {
                        start,
                        limit,
                        stride,
                    })
                    .collect()
            }
            (K::DynamicSliceSizes, V::Ints(x)) => p.dynamic_slice_sizes = x.to_vec(),
            (K::Padding, V::Padding(x)) => {
                p.padding_config = Some(PaddingConfig {
                    dimensions: x
                        .iter()
                        .map(|&[lo, hi, int]| PaddingConfigDimension {
                            edge_padding_low: lo,
                            edge_padding_high: hi,
                            interior_padding: int,
                        })
                        .collect(),
                })
            }
            (K::Window, V::Window(w)) => {
                p.window = Some(Window {
                    dimensions: w
                        .iter()
                        .map(|d| WindowDimension {
                            size: d.size,
                            stride: d.stride,
                            padding_low: d.pad_lo,
                            padding_high: d.pad_hi,
                            window_dilation: d.rhs_dilate,
                            base_dilation: d.lhs_dilate,
                            window_reversal: d.reversal,
                        })
                        .collect(),
                })
            }
            (K::DimLabels, V::DimLabels(c)) => {
                p.convolution_dimension_numbers = Some(ConvolutionDimensionNumbers {
                    input_batch_dimension: c.input_batch,
                    input_feature_dimension: c.input_feature,
                    input_spatial_dimensions: c.input_spatial.to_vec(),
                    kernel_input_feature_dimension: c.kernel_input_feature,
                    kernel_output_feature_dimension: c.kernel_output_feature,
                    kernel_spatial_dimensions: c.kernel_spatial.to_vec(),
                    output_batch_dimension: c.output_batch,
                    output_feature_dimension: c.output_feature,
                    output_spatial_dimensions: c.output_spatial.to_vec(),
                })
            }
            (K::FeatureGroupCount, V::Int(x)) => p.feature_group_count = *x,
            (K::BatchGroupCount, V::Int(x)) => p.batch_group_count = *x,
            (K::LhsBatchDims, V::Ints(x)) => dot(p).lhs_batch_dimensions = x.to_vec(),
            (K::LhsContractingDims, V::Ints(x)) => dot(p).lhs_contracting_dimensions = x.to_vec(),
            (K::RhsBatchDims, V::Ints(x)) => dot(p).rhs_batch_dimensions = x.to_vec(),
            (K::RhsContractingDims, V::Ints(x)) => dot(p).rhs_contracting_dimensions = x.to_vec(),
            (K::OffsetDims, V::Ints(x)) => gather(p).offset_dims = x.to_vec(),
            (K::CollapsedSliceDims, V::Ints(x)) => gather(p).collapsed_slice_dims = x.to_vec(),
            (K::StartIndexMap, V::Ints(x)) => gather(p).start_index_map = x.to_vec(),
            (K::OperandBatchingDims, V::Ints(x)) => gather(p).operand_batching_dims = x.to_vec(),
            (K::StartIndicesBatchingDims, V::Ints(x)) => {
                gather(p).start_indices_batching_dims = x.to_vec()
            }
            (K::SliceSizes, V::Ints(x)) => p.gather_slice_sizes = x.to_vec(),
            (K::UpdateWindowDims, V::Ints(x)) => scatter(p).update_window_dims = x.to_vec(),
            (K::InsertedWindowDims, V::Ints(x)) => scatter(p).inserted_window_dims = x.to_vec(),
            (K::ScatterDimsToOperandDims, V::Ints(x)) => {
                scatter(p).scatter_dims_to_operand_dims = x.to_vec()
            }
            (K::InputBatchingDims, V::Ints(x)) => scatter(p).input_batching_dims = x.to_vec(),
            (K::ScatterIndicesBatchingDims, V::Ints(x)) => {
                scatter(p).scatter_indices_batching_dims = x.to_vec()
            }
            (K::IndexVectorDim, V::Int(x)) => {
                if op == Opcode::Scatter {
                    scatter(p).index_vector_dim = *x
                } else {
                    gather(p).index_vector_dim = *x
                }
            }
            (K::IndicesAreSorted, V::Bool(b)) => p.indices_are_sorted = *b,
            (K::UniqueIndices, V::Bool(b)) => p.unique_indices = *b,
            (K::Direction, V::Direction(d)) => p.comparison_direction = d.name().into(),
            (K::Type, V::CmpType(t)) => p.comparison_type = t.name().into(),
            (K::K, V::Int(x)) => p.k = *x,
            (K::Largest, V::Bool(b)) => p.largest = *b,
            (K::IsStable, V::Bool(b)) => p.is_stable = *b,
            (K::ExponentBits, V::Int(x)) => p.exponent_bits = int32(*x)?,
            (K::MantissaBits, V::Int(x)) => p.mantissa_bits = int32(*x)?,
            (K::Distribution, V::Ident(s)) => {
                p.distribution = number_of(DISTRIBUTIONS, s, "distribution")?
            }
            (K::Algorithm, V::Ident(s)) if op == Opcode::RngBitGenerator => {
                p.rng_algorithm = number_of(RNG_ALGORITHMS, s, "algorithm")?
            }
            (K::Algorithm, V::Ident(s)) => {
                precision.get_or_insert_with(Default::default).algorithm =
                    number_of(DOT_ALGORITHMS, s, "algorithm")?
            }
            (K::FftType, V::Ident(s)) => p.fft_type = number_of(FFT_TYPES, s, "fft_type")?,
            (K::FftLength, V::Ints(x)) => p.fft_length = x.to_vec(),
            (K::Lower, V::Bool(b)) if op == Opcode::Cholesky => {
                p.cholesky_options = Some(CholeskyOptions { lower: *b })
            }
            (K::LeftSide, V::Bool(b)) => tri(p).left_side = *b,
            (K::Lower, V::Bool(b)) => tri(p).lower = *b,
            (K::UnitDiagonal, V::Bool(b)) => tri(p).unit_diagonal = *b,
            (K::TransposeA, V::Ident(s)) => {
                tri(p).transpose_a = number_of(TRANSPOSES, s, "transpose_a")?
            }
            (K::Kind, V::FusionKind(k)) => p.fusion_kind = k.name().into(),
            (K::ChannelId, V::Int(x)) => p.channel_id = *x,
            (K::ReplicaGroups, V::ReplicaGroups(g)) => replica_groups_to_proto(g, p)?,
            (K::SourceTargetPairs, V::Pairs(pairs)) => {
                p.source_target_pairs = pairs
                    .iter()
                    .map(|&[source, target]| SourceTarget { source, target })
                    .collect()
            }
            (K::UseGlobalDeviceIds, V::Bool(b)) => p.use_global_device_ids = *b,
            (K::ConstrainLayout, V::Bool(b)) => p.constrain_layout = *b,
            (K::CustomCallTarget, V::Str(s)) => p.custom_call_target = s.to_string(),
            (K::ControlPredecessors, V::Insts(is)) => {
                p.control_predecessor_ids = is.iter().map(|&i| inst(i)).collect()
            }
            (_, V::Comp(c)) => called.push((k.clone(), vec![*c])),
            (_, V::Comps(cs)) => called.push((k.clone(), cs.to_vec())),
            (_, V::Raw(text)) => {
                if !raw_to_proto(k, text, p, &mut precision) {
                    fa.insert(format!("{VERBATIM_PREFIX}{}", k.name()), text.to_string());
                }
            }
            _ => {
                return Err(format!(
                    "attribute {} has a value of the wrong kind",
                    k.name()
                ))
            }
        }
    }
    if op == Opcode::Convolution {
        p.feature_group_count = p.feature_group_count.max(1);
        p.batch_group_count = p.batch_group_count.max(1);
    }
    if let Some(pc) = precision {
        p.precision_config = Some(pc);
    }
    p.called_computation_ids = called_to_proto(op, called)?.into_iter().map(comp).collect();
    if !fa.is_empty() {
        p.frontend_attributes
            .get_or_insert_with(FrontendAttributes::default)
            .map
            .extend(fa);
    }
    Ok(())
}

/// Puts a verbatim attribute in its proto field when that field renders back to the same
/// text; returns whether it did.
fn raw_to_proto(
    k: &AttrKey,
    text: &str,
    p: &mut HloInstructionProto,
    precision: &mut Option<PrecisionConfig>,
) -> bool {
    match k {
        AttrKey::Metadata => match verbatim::parse_metadata(text) {
            Some(md) if verbatim::render_metadata(&md).as_deref() == Some(text) => {
                p.metadata = Some(md);
                true
            }
            _ => false,
        },
        AttrKey::BackendConfig => match verbatim::parse_backend_config(text) {
            Some(b) if verbatim::render_backend_config(&b).as_deref() == Some(text) => {
                p.backend_config = b;
                true
            }
            _ => false,
        },
        AttrKey::Sharding => match verbatim::parse_sharding(text) {
            Some(s) if verbatim::render_sharding(&s).as_deref() == Some(text) => {
                p.sharding = Some(s);
                true
            }
            _ => false,
        },
        AttrKey::FrontendAttributes => match verbatim::parse_frontend_attributes(text) {
            Some(map)
                if !map.keys().any(|k| k.starts_with(VERBATIM_PREFIX))
                    && verbatim::render_frontend_attributes(&map).as_deref() == Some(text) =>
            {
                p.frontend_attributes
                    .get_or_insert_with(FrontendAttributes::default)
                    .map
                    .extend(map);
                true
            }
            _ => false,
        },
        AttrKey::Other(name) => match &**name {
            "operand_precision" => match verbatim::parse_precision(text) {
                Some(v) if verbatim::render_precision(&v).as_deref() == Some(text) => {
                    precision
                        .get_or_insert_with(Default::default)
                        .operand_precision = v;
                    true
                }
                _ => false,
            },
            "custom_call_has_side_effect" if text == "true" => {
                p.custom_call_has_side_effect = true;
                true
            }
            _ => false,
        },
        _ => false,
    }
}

/// The called computations of an instruction with opcode `op`, in XLA's order, from its
/// computation attributes.
fn called_to_proto(op: Opcode, called: Vec<(AttrKey, Vec<CompId>)>) -> Result<Vec<CompId>, String> {
    let get = |key: AttrKey| {
        called
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, c)| c.clone())
            .ok_or_else(|| format!("{} without {}", op.name(), key.name()))
    };
    Ok(match op {
        Opcode::While => [get(AttrKey::Body)?, get(AttrKey::Condition)?].concat(),
        Opcode::SelectAndScatter => [get(AttrKey::Select)?, get(AttrKey::Scatter)?].concat(),
        Opcode::Conditional if called.iter().any(|(k, _)| *k == AttrKey::TrueComputation) => [
            get(AttrKey::TrueComputation)?,
            get(AttrKey::FalseComputation)?,
        ]
        .concat(),
        _ => called.into_iter().flat_map(|(_, c)| c).collect(),
    })
}

fn dot(p: &mut HloInstructionProto) -> &mut DotDimensionNumbers {
    p.dot_dimension_numbers.get_or_insert_with(Default::default)
}

fn gather(p: &mut HloInstructionProto) -> &mut GatherDimensionNumbers {
    p.gather_dimension_numbers
        .get_or_insert_with(Default::default)
}

fn scatter(p: &mut HloInstructionProto) -> &mut ScatterDimensionNumbers {
    p.scatter_dimension_numbers
        .get_or_insert_with(Default::default)
}

fn tri(p: &mut HloInstructionProto) -> &mut TriangularSolveOptions {
    p.triangular_solve_options
        .get_or_insert_with(Default::default)
}
