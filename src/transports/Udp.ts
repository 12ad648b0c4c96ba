/**
 * The UDP listener for editor focus datagrams (default port: the HTTP port + 1, on loopback).
 *
 * Thin: it bounds and filters, then hands the datagram's text to `Telemetry.recordFocus`, which
 * decodes it. A datagram from a non-loopback address is dropped (it could only arrive if the
 * socket were bound beyond loopback, which the daemon never does, but the check does not rely on
 * that), one above `datagramBytesMax` is dropped unread, and each outcome is counted. Nothing is
 * ever answered: UDP senders are fire-and-forget, and an answer would make the daemon a
 * reflector. The socket closes with its scope.
 */
import { createSocket, type RemoteInfo, type Socket } from "node:dgram"
import { isIP } from "node:net"
import { Effect, type Scope } from "effect"
import { isLoopback } from "./HttpServer.ts"
import { Telemetry } from "./Telemetry.ts"

/** Largest focus datagram accepted. */
export const datagramBytesMax = 8 * 1024

/** Where the listener binds. */
export interface UdpListenerConfig {
  /** A loopback address (the daemon passes 127.0.0.1 or ::1). */
  readonly host: string
  /** 0 picks a free port. */
  readonly port: number
}

/** A bound listener. */
export interface RunningUdpListener {
  readonly port: number
}

/** True when the sender's address is this machine's loopback (IPv4-mapped forms included). */
export const isLoopbackSender = (address: string): boolean =>
  isLoopback(address.startsWith("::ffff:") ? address.slice("::ffff:".length) : address)

/** Handles one datagram: filter, bound, decode, keep; every outcome counted. */
export const receiveDatagram = (message: Buffer, sender: Pick<RemoteInfo, "address">) =>
  Effect.gen(function* () {
    const telemetry = yield* Telemetry
    yield* telemetry.countReceived
    if (!isLoopbackSender(sender.address)) return yield* telemetry.countDropped("nonLoopback")
    if (message.length > datagramBytesMax) return yield* telemetry.countDropped("oversized")
    yield* telemetry.recordFocus(message.toString("utf8")).pipe(Effect.ignore)
  })

/** Binds the listener; it closes when the scope closes. */
export const startUdpListener = (
  config: UdpListenerConfig,
): Effect.Effect<RunningUdpListener, Error, Telemetry | Scope.Scope> =>
  Effect.gen(function* () {
    const telemetry = yield* Telemetry
    const socket: Socket = yield* Effect.acquireRelease(
      Effect.callback<Socket, Error>((resume) => {
        const socket = isIP(config.host) === 6 ? createSocket({ type: "udp6", ipv6Only: true }) : createSocket("udp4")
        socket.once("error", (error) => {
          socket.close()
          resume(Effect.fail(error))
        })
        socket.bind(config.port, config.host, () => {
          socket.removeAllListeners("error")
          resume(Effect.succeed(socket))
        })
      }),
      (socket) =>
        Effect.andThen(
          telemetry.setUdpPort(null),
          Effect.callback<void>((resume) => {
            socket.close(() => resume(Effect.void))
          }),
        ),
    )
    socket.on("error", () => undefined) // a receive error concerns one datagram; keep listening
    socket.on("message", (message, sender) =>
      Effect.runSync(receiveDatagram(message, sender).pipe(Effect.provideService(Telemetry, telemetry))),
    )
    const port = socket.address().port
    yield* telemetry.setUdpPort(port)
    return { port }
  })
