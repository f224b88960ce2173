// orders/create-order.dto.ts: validated on enqueue (needs class-validator and class-transformer)
import { IsEmail, IsInt, IsString, Min, MinLength } from 'class-validator';

export class CreateOrderDto {
  @IsString() @MinLength(1) orderId!: string;
  @IsEmail() email!: string;
  @IsInt() @Min(1) totalCents!: number;
}
