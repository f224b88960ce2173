import { ConfigurationError } from '../../lib/core';
import { checkSchemaUsable, loadDtoValidator } from '../../lib/core/definition/validation';

/** A loader of an app where `missing` is not installed: Node's MODULE_NOT_FOUND, as require throws it. */
const without =
  (missing: string) =>
  (name: string): Record<string, unknown> => {
    if (name === missing) throw Object.assign(new Error(`Cannot find module '${name}'`), { code: 'MODULE_NOT_FOUND' });
    return require(name) as Record<string, unknown>;
  };

class ApproveDto {}

describe('DTO classes need class-validator and class-transformer', () => {
  it('names the signal that validates with a DTO and what to install, when class-validator is missing', () => {
    const load = () => loadDtoValidator('Signal "approve" of ApprovalWorkflows validates its payload', 'ApproveDto', without('class-validator'));
    expect(load).toThrow(ConfigurationError);
    expect(load).toThrow(
      'Signal "approve" of ApprovalWorkflows validates its payload with the DTO class ApproveDto, which needs class-validator and class-transformer: run "npm install class-validator class-transformer", or give a Standard Schema validator (zod, valibot, arktype) as its schema instead.',
    );
    expect(() => loadDtoValidator('Workflow "signup" validates its input', 'SignupDto', without('class-transformer'))).toThrow(
      'Workflow "signup" validates its input with the DTO class SignupDto, which needs class-validator',
    );
  });

  it('loads both when installed; a Standard Schema or no schema needs neither', () => {
    const loaded = loadDtoValidator('Workflow "w" validates its input', 'ApproveDto', (name) => require(name) as Record<string, unknown>);
    expect(typeof loaded.validate).toBe('function');
    expect(typeof loaded.plainToInstance).toBe('function');
    expect(() => checkSchemaUsable('Signal "approve" of X validates its payload', ApproveDto)).not.toThrow();
    const standard = { '~standard': { version: 1 as const, vendor: 'test', validate: (value: unknown) => ({ value }) } };
    expect(() => checkSchemaUsable('Workflow "w" validates its input', standard)).not.toThrow();
    expect(() => checkSchemaUsable('Workflow "w" validates its input', undefined)).not.toThrow();
  });
});
