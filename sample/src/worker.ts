import 'reflect-metadata';

import { NestFactory } from '@nestjs/core';

import { RedflowServer } from '../../lib/microservice';
import { AppModule } from './app.module';

/** The worker entry: a Nest microservice whose transport is the workflow worker. */
async function bootstrap() {
  const app = await NestFactory.createMicroservice(AppModule.register({ worker: true }), { strategy: new RedflowServer() });
  app.enableShutdownHooks();
  await app.listen();
}

void bootstrap();
