// OpenTelemetry for a Node program that knows nothing of it, the standard way:
//   node --require tests/otel/preload.js examples/node/webhook.js
// The Node SDK with the http instrumentation: every request the program serves
// gets a SERVER span that continues the traceparent it came with (W3C trace
// context, the SDK's default propagator), every request it makes over node:http
// a CLIENT span; spans go over OTLP/HTTP protobuf to
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (or OTEL_EXPORTER_OTLP_ENDPOINT +
// /v1/traces), one export per span so a test sees them at once.
// OTEL_SERVICE_NAME names the program (default "example-webhook").
'use strict';

const { NodeTracerProvider } = require('@opentelemetry/sdk-trace-node');
const { SimpleSpanProcessor } = require('@opentelemetry/sdk-trace-base');
const { OTLPTraceExporter } = require('@opentelemetry/exporter-trace-otlp-proto');
const { resourceFromAttributes } = require('@opentelemetry/resources');
const { registerInstrumentations } = require('@opentelemetry/instrumentation');
const { HttpInstrumentation } = require('@opentelemetry/instrumentation-http');

const provider = new NodeTracerProvider({
  resource: resourceFromAttributes({
    'service.name': process.env.OTEL_SERVICE_NAME || 'example-webhook',
  }),
  spanProcessors: [new SimpleSpanProcessor(new OTLPTraceExporter())],
});
provider.register();
registerInstrumentations({ instrumentations: [new HttpInstrumentation()] });

for (const sig of ['SIGINT', 'SIGTERM']) {
  process.prependListener(sig, () => { provider.forceFlush().catch(() => {}); });
}
