//! `GraphBuilder`: assembles an ONNX graph from named inputs, constant initializers and nodes, and
//! encodes it as a `ModelProto` (IR version 8, default opset 17).

use super::OnnxError;
use super::proto::*;

pub(crate) const IR_VERSION: i64 = 8;
pub(crate) const OPSET: i64 = 17;

/// One dimension of a graph input or output: fixed, or a named symbolic size such as `"batch"`.
#[derive(Debug, Clone, PartialEq)]
pub enum Dim {
    Fixed(i64),
    Param(String),
}

impl Dim {
    pub fn batch() -> Dim {
        Dim::Param("batch".into())
    }
}

/// A node attribute.
#[derive(Debug, Clone, PartialEq)]
pub enum Attr {
    Int(i64),
    Float(f32),
    Str(String),
    Ints(Vec<i64>),
    Floats(Vec<f32>),
}

#[derive(Default)]
pub struct GraphBuilder {
    name: String,
    nodes: Vec<NodeProto>,
    initializers: Vec<TensorProto>,
    inputs: Vec<ValueInfoProto>,
    outputs: Vec<ValueInfoProto>,
    next_id: usize,
}

fn value_info(name: &str, dims: &[Dim]) -> ValueInfoProto {
    let dim = dims
        .iter()
        .map(|d| match d {
            Dim::Fixed(v) => Dimension { dim_value: Some(*v), dim_param: None },
            Dim::Param(p) => Dimension { dim_value: None, dim_param: Some(p.clone()) },
        })
        .collect();
    ValueInfoProto {
        name: Some(name.to_string()),
        r#type: Some(TypeProto {
            tensor_type: Some(TypeProtoTensor {
                elem_type: Some(data_type::FLOAT),
                shape: Some(TensorShapeProto { dim }),
            }),
        }),
        doc_string: None,
    }
}

impl GraphBuilder {
    pub fn new(name: &str) -> Self {
        GraphBuilder { name: name.to_string(), ..Default::default() }
    }

    /// A fresh, unique value name with a readable prefix.
    pub fn fresh(&mut self, prefix: &str) -> String {
        self.next_id += 1;
        format!("{prefix}_{}", self.next_id)
    }

    /// Declares a float32 graph input.
    pub fn input(&mut self, name: &str, dims: &[Dim]) {
        self.inputs.push(value_info(name, dims));
    }

    /// Declares a float32 graph output.
    pub fn output(&mut self, name: &str, dims: &[Dim]) {
        self.outputs.push(value_info(name, dims));
    }

    /// A float32 constant (initializer); returns its name. Fails if `data` does not fill `dims`.
    pub fn constant_f32(&mut self, prefix: &str, dims: &[i64], data: &[f32]) -> Result<String, OnnxError> {
        let n: i64 = dims.iter().product();
        if usize::try_from(n).ok() != Some(data.len()) {
            return Err(OnnxError::Shape(format!(
                "{prefix}: dims {dims:?} hold {n} values but {} were given",
                data.len()
            )));
        }
        if let Some(i) = data.iter().position(|x| !x.is_finite()) {
            return Err(OnnxError::NotFinite(format!("{prefix}[{i}] = {}", data[i])));
        }
        let name = self.fresh(prefix);
        let raw = data.iter().flat_map(|x| x.to_le_bytes()).collect();
        self.initializers.push(TensorProto {
            dims: dims.to_vec(),
            data_type: Some(data_type::FLOAT),
            name: Some(name.clone()),
            raw_data: Some(raw),
        });
        Ok(name)
    }

    /// An int64 constant (shapes, axes); returns its name.
    pub fn constant_i64(&mut self, prefix: &str, dims: &[i64], data: &[i64]) -> String {
        let name = self.fresh(prefix);
        let raw = data.iter().flat_map(|x| x.to_le_bytes()).collect();
        self.initializers.push(TensorProto {
            dims: dims.to_vec(),
            data_type: Some(data_type::INT64),
            name: Some(name.clone()),
            raw_data: Some(raw),
        });
        name
    }

    /// Adds a node. An empty input name stands for an omitted optional input.
    pub fn node(&mut self, op: &str, inputs: &[&str], outputs: &[&str], attrs: &[(&str, Attr)]) {
        let attribute = attrs
            .iter()
            .map(|(name, a)| {
                let mut p = AttributeProto { name: Some(name.to_string()), ..Default::default() };
                match a {
                    Attr::Int(v) => (p.r#type, p.i) = (Some(attribute_type::INT), Some(*v)),
                    Attr::Float(v) => (p.r#type, p.f) = (Some(attribute_type::FLOAT), Some(*v)),
                    Attr::Str(v) => (p.r#type, p.s) = (Some(attribute_type::STRING), Some(v.as_bytes().to_vec())),
                    Attr::Ints(v) => (p.r#type, p.ints) = (Some(attribute_type::INTS), v.clone()),
                    Attr::Floats(v) => (p.r#type, p.floats) = (Some(attribute_type::FLOATS), v.clone()),
                }
                p
            })
            .collect();
        let name = self.fresh(op);
        self.nodes.push(NodeProto {
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: outputs.iter().map(|s| s.to_string()).collect(),
            name: Some(name),
            op_type: Some(op.to_string()),
            attribute,
            domain: None,
        });
    }

    /// Adds a one-output node and returns its output's (fresh) name.
    pub fn op(&mut self, op: &str, inputs: &[&str], attrs: &[(&str, Attr)]) -> String {
        let out = self.fresh(&op.to_lowercase());
        self.node(op, inputs, &[&out], attrs);
        out
    }

    /// The finished model; `metadata` goes into `metadata_props` (model id, feature version, ...).
    pub fn finish(self, metadata: &[(&str, &str)]) -> ModelProto {
        ModelProto {
            ir_version: Some(IR_VERSION),
            opset_import: vec![OperatorSetIdProto { domain: Some(String::new()), version: Some(OPSET) }],
            producer_name: Some("tradebot".into()),
            producer_version: Some(env!("CARGO_PKG_VERSION").into()),
            domain: None,
            model_version: Some(1),
            doc_string: None,
            graph: Some(GraphProto {
                node: self.nodes,
                name: Some(self.name),
                initializer: self.initializers,
                doc_string: None,
                input: self.inputs,
                output: self.outputs,
            }),
            metadata_props: metadata
                .iter()
                .map(|(k, v)| StringStringEntryProto { key: Some(k.to_string()), value: Some(v.to_string()) })
                .collect(),
        }
    }
}

/// Serialises a model to the bytes of a `.onnx` file.
pub(crate) fn encode(model: &ModelProto) -> Vec<u8> {
    prost::Message::encode_to_vec(model)
}
