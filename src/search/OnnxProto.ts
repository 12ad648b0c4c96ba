/**
 * A minimal protobuf writer for the few ONNX messages mnemos generates (ModelProto, GraphProto,
 * NodeProto, AttributeProto, TensorProto, ValueInfoProto). PyPI is out of reach, so the ONNX
 * files are written here, field by field, from onnx.proto (IR version 8, opset 13).
 *
 * Only what the generated graphs need is supported: float/int64 tensors as raw little-endian
 * bytes, int/float/ints attributes, tensor-typed inputs and outputs with fixed or symbolic dims.
 */

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

/** Growable byte sink with protobuf primitives. */
class Writer {
  private chunks: Array<Uint8Array> = []
  private length = 0

  private push(bytes: Uint8Array) {
    this.chunks.push(bytes)
    this.length += bytes.length
  }

  varint(value: number | bigint) {
    let v = BigInt.asUintN(64, BigInt(value))
    const out: Array<number> = []
    do {
      let byte = Number(v & 0x7fn)
      v >>= 7n
      if (v !== 0n) byte |= 0x80
      out.push(byte)
    } while (v !== 0n)
    this.push(Uint8Array.from(out))
  }

  tag(field: number, wireType: 0 | 1 | 2 | 5) {
    this.varint((field << 3) | wireType)
  }

  int(field: number, value: number) {
    this.tag(field, 0)
    this.varint(value)
  }

  float(field: number, value: number) {
    this.tag(field, 5)
    const bytes = new Uint8Array(4)
    new DataView(bytes.buffer).setFloat32(0, value, true)
    this.push(bytes)
  }

  bytes(field: number, value: Uint8Array) {
    this.tag(field, 2)
    this.varint(value.length)
    this.push(value)
  }

  string(field: number, value: string) {
    this.bytes(field, new TextEncoder().encode(value))
  }

  message(field: number, build: (writer: Writer) => void) {
    const inner = new Writer()
    build(inner)
    this.bytes(field, inner.finish())
  }

  finish(): Uint8Array {
    const out = new Uint8Array(this.length)
    let offset = 0
    for (const chunk of this.chunks) {
      out.set(chunk, offset)
      offset += chunk.length
    }
    return out
  }
}

// Field numbers from onnx.proto.
const writeTensor = (w: Writer, tensor: OnnxTensor) => {
  for (const dim of tensor.dims) w.int(1, dim) // dims
  w.int(2, tensor.type) // data_type
  w.string(8, tensor.name) // name
  w.bytes(9, tensor.raw) // raw_data
}

const writeAttribute = (w: Writer, attribute: OnnxAttribute) => {
  w.string(1, attribute.name)
  if ("int" in attribute) {
    w.int(3, attribute.int) // i
    w.int(20, 2) // type = INT
  } else if ("float" in attribute) {
    w.float(2, attribute.float) // f
    w.int(20, 1) // type = FLOAT
  } else {
    for (const value of attribute.ints) w.int(8, value) // ints (unpacked is valid)
    w.int(20, 7) // type = INTS
  }
}

const writeNode = (w: Writer, node: OnnxNode, index: number) => {
  for (const input of node.inputs) w.string(1, input)
  for (const output of node.outputs) w.string(2, output)
  w.string(3, node.name ?? `${node.opType}_${index}`)
  w.string(4, node.opType)
  for (const attribute of node.attributes ?? []) w.message(5, (inner) => writeAttribute(inner, attribute))
}

const writeValueInfo = (w: Writer, info: OnnxValueInfo) => {
  w.string(1, info.name)
  w.message(2, (type) =>
    type.message(1, (tensorType) => {
      tensorType.int(1, info.type) // elem_type
      tensorType.message(2, (shape) => {
        for (const dim of info.dims)
          shape.message(1, (d) => (typeof dim === "number" ? d.int(1, dim) : d.string(2, dim)))
      })
    }),
  )
}

/** Serializes a model to ONNX protobuf bytes. */
export const encodeOnnxModel = (model: OnnxModel): Uint8Array => {
  const w = new Writer()
  w.int(1, 8) // ir_version
  w.string(2, model.producer) // producer_name
  w.message(7, (graph) => {
    model.nodes.forEach((node, index) => {
      graph.message(1, (inner) => writeNode(inner, node, index))
    })
    graph.string(2, model.graphName)
    for (const tensor of model.initializers) graph.message(5, (inner) => writeTensor(inner, tensor))
    for (const input of model.inputs) graph.message(11, (inner) => writeValueInfo(inner, input))
    for (const output of model.outputs) graph.message(12, (inner) => writeValueInfo(inner, output))
  })
  w.message(8, (opset) => {
    opset.string(1, "")
    opset.int(2, model.opset ?? 13)
  })
  return w.finish()
}

/** Raw bytes of an int64 tensor. */
export const int64Raw = (values: ReadonlyArray<number>): Uint8Array =>
  new Uint8Array(BigInt64Array.from(values.map((value) => BigInt(value))).buffer)

/** Raw bytes of a float tensor (copied, little-endian on every platform Node runs on). */
export const floatRaw = (values: Float32Array): Uint8Array =>
  new Uint8Array(values.buffer.slice(values.byteOffset, values.byteOffset + values.byteLength))
