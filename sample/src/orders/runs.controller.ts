import { Body, ConflictException, Controller, Get, HttpCode, NotFoundException, Param, Post } from '@nestjs/common';

import { IdempotencyConflictError, RedflowClient } from '../../../lib';
import { CheckoutWorkflows } from './checkout.workflows';
import { CreateOrderDto } from './create-order.dto';

@Controller()
export class RunsController {
  constructor(private readonly redflow: RedflowClient) {}

  /** Starts checkout; the order id doubles as the idempotency key, so a retried POST starts nothing new. */
  @Post('orders')
  async createOrder(@Body() order: CreateOrderDto) {
    try {
      const run = await this.redflow.run(CheckoutWorkflows, 'checkout', order, { idempotencyKey: order.orderId });
      return { runId: run.id };
    } catch (error) {
      if (error instanceof IdempotencyConflictError) throw new ConflictException(`Order "${order.orderId}" was already placed with other details.`);
      throw error;
    }
  }

  @Get('runs/:id')
  async getRun(@Param('id') id: string) {
    const run = await this.redflow.getRun(id);
    if (!run) throw new NotFoundException(`Run "${id}" does not exist.`);
    return { ...run, steps: await this.redflow.getRunSteps(id) };
  }

  @Post('runs/:id/cancel')
  @HttpCode(200)
  async cancel(@Param('id') id: string) {
    return { canceled: await this.redflow.cancelRun(id, { reason: 'canceled over HTTP' }) };
  }
}
