/**
 * ONNX models described as plain data and serialised with the compiled ONNX protobuf definitions
 * of the npm package `onnx-proto` (protobufjs code generated from onnx.proto, IR version 8).
 * mnemos generates two kinds of graph this way: the static sentence-embedding model
 * (StaticModelBuild.ts) and, in tests, small transformer-shaped models that exercise the
 * transformer path.
 *
 * Only what those graphs need is described: float/int64 tensors as raw little-endian bytes,
 * int/float/ints attributes, tensor-typed inputs and outputs with fixed or symbolic dims, opset 13
 * of the default domain unless another is named.
 */
import onnxProto from "onnx-proto"

const { onnx } = onnxProto

/** ONNX TensorProto.DataType values used here. */
export const OnnxType = { float: 1, int32: 6, int64: 7 } as const
export type OnnxType = (typeof OnnxType)[keyof typeof OnnxType]

/** A graph initializer or constant. */
export interface OnnxTensor {
  readonly name: string
  readonly type: OnnxType
  readonly dims: ReadonlyArray<number>
  /** Little-endian raw bytes (Float32Array / BigInt64Array / Int32Array buffers). */
  readonly raw: Uint8Array
}

/** A node attribute. */
export type OnnxAttribute =
  | { readonly name: string; readonly int: number }
  | { readonly name: string; readonly float: number }
  | { readonly name: string; readonly ints: ReadonlyArray<number> }

/** A graph node. */
export interface OnnxNode {
  readonly opType: string
  readonly inputs: ReadonlyArray<string>
  readonly outputs: ReadonlyArray<string>
  readonly name?: string
  readonly attributes?: ReadonlyArray<OnnxAttribute>
}

/** A graph input or output: a tensor with named (symbolic) or fixed dims. */
export interface OnnxValueInfo {
  readonly name: string
  readonly type: OnnxType
  readonly dims: ReadonlyArray<number | string>
}

/** A whole model. */
export interface OnnxModel {
  readonly producer: string
  readonly graphName: string
  readonly nodes: ReadonlyArray<OnnxNode>
  readonly initializers: ReadonlyArray<OnnxTensor>
  readonly inputs: ReadonlyArray<OnnxValueInfo>
  readonly outputs: ReadonlyArray<OnnxValueInfo>
  readonly opset?: number
}

const attributeProto = (attribute: OnnxAttribute): InstanceType<typeof onnx.AttributeProto> => {
  const { AttributeType } = onnx.AttributeProto
  if ("int" in attribute)
    return onnx.AttributeProto.create({ name: attribute.name, i: attribute.int, type: AttributeType.INT })
  if ("float" in attribute)
    return onnx.AttributeProto.create({ name: attribute.name, f: attribute.float, type: AttributeType.FLOAT })
  return onnx.AttributeProto.create({ name: attribute.name, ints: [...attribute.ints], type: AttributeType.INTS })
}

const valueInfoProto = (info: OnnxValueInfo) =>
  onnx.ValueInfoProto.create({
    name: info.name,
    type: {
      tensorType: {
        elemType: info.type,
        shape: { dim: info.dims.map((dim) => (typeof dim === "number" ? { dimValue: dim } : { dimParam: dim })) },
      },
    },
  })

/** Serializes a model to ONNX protobuf bytes. */
export const encodeOnnxModel = (model: OnnxModel): Uint8Array =>
  onnx.ModelProto.encode(
    onnx.ModelProto.create({
      irVersion: 8,
      producerName: model.producer,
      opsetImport: [{ domain: "", version: model.opset ?? 13 }],
      graph: {
        name: model.graphName,
        node: model.nodes.map((node, index) => ({
          input: [...node.inputs],
          output: [...node.outputs],
          name: node.name ?? `${node.opType}_${index}`,
          opType: node.opType,
          attribute: (node.attributes ?? []).map(attributeProto),
        })),
        initializer: model.initializers.map((tensor) => ({
          name: tensor.name,
          dims: [...tensor.dims],
          dataType: tensor.type,
          rawData: tensor.raw,
        })),
        input: model.inputs.map(valueInfoProto),
        output: model.outputs.map(valueInfoProto),
      },
    }),
  ).finish()

/** Raw bytes of an int64 tensor. */
export const int64Raw = (values: ReadonlyArray<number>): Uint8Array =>
  new Uint8Array(BigInt64Array.from(values.map((value) => BigInt(value))).buffer)

/** Raw bytes of a float tensor (copied, little-endian on every platform Node runs on). */
export const floatRaw = (values: Float32Array): Uint8Array =>
  new Uint8Array(values.buffer.slice(values.byteOffset, values.byteOffset + values.byteLength))
