import { Injectable, type CanActivate, type ExecutionContext } from '@nestjs/common';

/** The app's own guard that the dashboard guide (docs/guide/dashboard.md) reuses. */
@Injectable()
export class AdminGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const request = context.switchToHttp().getRequest<{ headers: Record<string, string | undefined> }>();
    return request.headers['x-role'] === 'admin';
  }
}
