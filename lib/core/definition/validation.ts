import { ConfigurationError, InputValidationError, type ValidationIssue } from '../errors';

/** The part of class-validator's `ValidationError` read here. */
interface ClassValidatorError {
  property: string;
  constraints?: Record<string, string>;
  children?: ClassValidatorError[];
}

interface DtoValidator {
  plainToInstance(cls: new () => object, plain: object): object;
  validate(instance: object): Promise<ClassValidatorError[]>;
}

let dtoValidator: DtoValidator | undefined;

/** Loads an optional peer the app installs (a computed name, resolved from here at run time). */
const requirePeer = (name: string): Record<string, unknown> => require(name) as Record<string, unknown>;

/**
 * class-validator and class-transformer, loaded the first time a DTO class validates something:
 * they are optional peer dependencies, so an app has one copy of each (the copy its DTOs'
 * decorators registered with) and an engine user with Standard Schema validators needs neither.
 * `subject` says what validates with `dto`, as in 'Workflow "signup" validates its input':
 * `ConfigurationError` naming it and what to install when they are missing.
 */
export function loadDtoValidator(subject: string, dto: string, load: (name: string) => Record<string, unknown> = requirePeer): DtoValidator {
  if (dtoValidator && load === requirePeer) return dtoValidator;
  const peer = (name: string): Record<string, unknown> => {
    try {
      return load(name);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'MODULE_NOT_FOUND') throw error;
      throw new ConfigurationError(
        `${subject} with the DTO class ${dto}, which needs class-validator and class-transformer: run "npm install class-validator class-transformer", or give a Standard Schema validator (zod, valibot, arktype) as its schema instead.`,
      );
    }
  };
  const transformer = peer('class-transformer');
  const validator = peer('class-validator');
  const loaded: DtoValidator = {
    plainToInstance: transformer.plainToInstance as DtoValidator['plainToInstance'],
    validate: validator.validate as DtoValidator['validate'],
  };
  if (load === requirePeer) dtoValidator = loaded;
  return loaded;
}

/**
 * Checks at startup that a schema can validate: a DTO class needs class-validator and
 * class-transformer installed (`ConfigurationError` naming `subject` and what to install).
 */
export function checkSchemaUsable(subject: string, schema: InputSchema | undefined): void {
  if (schema && !isStandardSchema(schema)) loadDtoValidator(subject, schema.name);
}

/** A Standard Schema issue (https://standardschema.dev). */
export interface StandardSchemaIssue {
  readonly message: string;
  readonly path?: ReadonlyArray<PropertyKey | { readonly key: PropertyKey }> | undefined;
}

/** The result of a Standard Schema validation. */
export type StandardSchemaResult<Output> = { readonly value: Output; readonly issues?: undefined } | { readonly issues: ReadonlyArray<StandardSchemaIssue> };

/** The Standard Schema interface implemented by zod, valibot, arktype, ... */
export interface StandardSchemaV1<Input = unknown, Output = Input> {
  readonly '~standard': {
    readonly version: 1;
    readonly vendor: string;
    readonly validate: (value: unknown) => StandardSchemaResult<Output> | Promise<StandardSchemaResult<Output>>;
    readonly types?: { readonly input: Input; readonly output: Output } | undefined;
  };
}

/** A class-validator DTO class. */
export type DtoClass<T extends object = object> = new (...args: never[]) => T;

/** A workflow's input schema: a Standard Schema validator or a class-validator DTO class. */
export type InputSchema = StandardSchemaV1 | DtoClass;

/** The handler's input type for a schema. */
export type InferInput<S> = S extends StandardSchemaV1<unknown, infer O> ? O : S extends DtoClass<infer T> ? T : unknown;

function isStandardSchema(schema: InputSchema): schema is StandardSchemaV1 {
  return typeof (schema as StandardSchemaV1)['~standard'] === 'object';
}

function flattenClassValidatorErrors(errors: ClassValidatorError[], path: string[] = []): ValidationIssue[] {
  const issues: ValidationIssue[] = [];
  for (const e of errors) {
    const here = [...path, e.property];
    for (const message of Object.values(e.constraints ?? {})) issues.push({ message, path: here });
    if (e.children?.length) issues.push(...flattenClassValidatorErrors(e.children, here));
  }
  return issues;
}

/**
 * Validates a workflow input. Returns the value the handler receives: the schema's output for a
 * Standard Schema, an instance of the class for a DTO. Throws `InputValidationError`. `subject`
 * names what validates in the error when a DTO class's libraries are missing.
 */
export async function validateInput(
  workflow: string,
  schema: InputSchema | undefined,
  value: unknown,
  subject = `Workflow "${workflow}" validates its input`,
): Promise<unknown> {
  if (!schema) return value;
  if (isStandardSchema(schema)) {
    const result = await schema['~standard'].validate(value);
    if (result.issues) {
      throw new InputValidationError(
        workflow,
        result.issues.map((i) => ({ message: i.message, path: i.path?.map((p) => (typeof p === 'object' ? p.key : p)) })),
      );
    }
    return result.value;
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new InputValidationError(workflow, [
      { message: `expected an object for ${schema.name}, got ${value === null ? 'null' : Array.isArray(value) ? 'an array' : typeof value}` },
    ]);
  }
  const { plainToInstance, validate } = loadDtoValidator(subject, schema.name);
  const instance = plainToInstance(schema as unknown as new () => object, value);
  const errors = await validate(instance);
  if (errors.length) throw new InputValidationError(workflow, flattenClassValidatorErrors(errors));
  return instance;
}
