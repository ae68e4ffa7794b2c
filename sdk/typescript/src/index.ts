// @hookflow/sdk: the client of hookflow's API and the webhook helper.
export { HookflowClient, HookflowError, TERMINAL_STATUSES } from "./client";
export type { ClientOptions, Page, RequestOptions } from "./client";
export { OPERATIONS } from "./generated/operations";
export type { Query } from "./generated/operations";
export {
  DEFAULT_TOLERANCE_S,
  Memo,
  StepContext,
  StepError,
  WebhookVerificationError,
  cancel,
  continueWith,
  fail,
  handleDelivery,
  handler,
  pending,
  permanentError,
  secretKey,
  sign,
  startChildren,
  succeed,
  transientError,
  verifySignature,
  waitForSignal,
} from "./webhook";
export type {
  CallbackHandler,
  HandlerOptions,
  HeaderSource,
  Secret,
  StepHandler,
  StepRequest,
  StepResult,
  WebhookAnswer,
} from "./webhook";
// Every schema of the API by name (Run, Workflow, StepOutcome, ...); StepRequest above is
// the schema's, with a type parameter for its payload.
export type * from "./generated/types";
export type { components, operations, paths, webhooks } from "./generated/openapi";
