;; kernels.wat: the runtime's inner loops in WebAssembly SIMD (128-bit vectors, four
;; float32 lanes: f32x4), for browsers and node versions that have it (every current one).
;; simd.mjs loads the assembled module (kernels.wasm, built from this file by
;; scripts/build_kernels.mjs) and falls back to the scalar JavaScript of train-layers.mjs
;; and transformer.mjs, which stay the reference.
;;
;; How to read it. Every array is float32 in the module's linear memory, which the
;; JavaScript side provides (one WebAssembly.Memory, imported as env.memory), and is named
;; by its byte address: element i of an array at `a` is at a + 4 i. A `v128.load` reads
;; four consecutive floats at once; `f32x4.mul` and `f32x4.add` work on the four lanes
;; side by side. A dot product of two rows of length n then runs n / 4 vector steps, each
;; summing into four partial sums (lane k sums the elements k, k + 4, k + 8, ...); the four
;; lanes are added at the end (`hsum`), and the last n mod 4 elements one by one.
;; Sums are in float32 (the scalar JavaScript sums in double): results differ from the
;; scalar path by rounding, a few units in the last place of float32.

(module
  (import "env" "memory" (memory 1))

  ;; The sum of the four lanes of v: (v0 + v2) + (v1 + v3), the order add4 below sums in,
  ;; so that a dot product gives the same float whichever path computes it (a row's
  ;; result does not depend on the rows beside it: batching never changes a result).
  (func $hsum (param $v v128) (result f32)
    (f32.add
      (f32.add (f32x4.extract_lane 0 (local.get $v)) (f32x4.extract_lane 2 (local.get $v)))
      (f32.add (f32x4.extract_lane 1 (local.get $v)) (f32x4.extract_lane 3 (local.get $v)))))

;; One dot product added to the float at c: c += the n floats at a times the n floats
  ;; at b. As in the tiles below: c += the vector part, then c += the tail (the last n mod 4
  ;; products, one at a time), so that every path rounds alike.
  (func $dot_into (param $c i32) (param $a i32) (param $b i32) (param $n i32)
    (local $acc v128) (local $t i32) (local $n4 i32)
    (local.set $n4 (i32.shl (i32.and (local.get $n) (i32.const -4)) (i32.const 2)))
    (block $done
      (loop $four
        (br_if $done (i32.ge_u (local.get $t) (local.get $n4)))
        (local.set $acc (f32x4.add (local.get $acc) (f32x4.mul
          (v128.load (i32.add (local.get $a) (local.get $t)))
          (v128.load (i32.add (local.get $b) (local.get $t))))))
        (local.set $t (i32.add (local.get $t) (i32.const 16)))
        (br $four)))
    (call $add1 (local.get $c) (call $hsum (local.get $acc)))
    (if (i32.and (local.get $n) (i32.const 3))
      (then (call $add1 (local.get $c) (call $tail (local.get $a) (local.get $b) (local.get $t) (local.get $n))))))

  ;; A tile of dot products: one row at a (length n) against the four rows of B starting at
  ;; b (rows `ldb` bytes apart), added to c[0..3] (the four floats at c). Each load of the
  ;; row at a serves four products.
  (func $tile1x4 (param $a i32) (param $b i32) (param $ldb i32) (param $n i32) (param $c i32)
    (local $b1 i32) (local $b2 i32) (local $b3 i32) (local $x v128)
    (local $s0 v128) (local $s1 v128) (local $s2 v128) (local $s3 v128)
    (local $t i32) (local $n4 i32)
    (local.set $b1 (i32.add (local.get $b) (local.get $ldb)))
    (local.set $b2 (i32.add (local.get $b1) (local.get $ldb)))
    (local.set $b3 (i32.add (local.get $b2) (local.get $ldb)))
    (local.set $n4 (i32.shl (i32.and (local.get $n) (i32.const -4)) (i32.const 2)))
    (block $done
      (loop $four
        (br_if $done (i32.ge_u (local.get $t) (local.get $n4)))
        (local.set $x (v128.load (i32.add (local.get $a) (local.get $t))))
        (local.set $s0 (f32x4.add (local.get $s0) (f32x4.mul (local.get $x) (v128.load (i32.add (local.get $b) (local.get $t))))))
        (local.set $s1 (f32x4.add (local.get $s1) (f32x4.mul (local.get $x) (v128.load (i32.add (local.get $b1) (local.get $t))))))
        (local.set $s2 (f32x4.add (local.get $s2) (f32x4.mul (local.get $x) (v128.load (i32.add (local.get $b2) (local.get $t))))))
        (local.set $s3 (f32x4.add (local.get $s3) (f32x4.mul (local.get $x) (v128.load (i32.add (local.get $b3) (local.get $t))))))
        (local.set $t (i32.add (local.get $t) (i32.const 16)))
        (br $four)))
    (call $add4 (local.get $c) (local.get $s0) (local.get $s1) (local.get $s2) (local.get $s3))
    (if (i32.and (local.get $n) (i32.const 3))
      (then (call $tails4 (local.get $a) (local.get $b) (local.get $ldb) (local.get $t) (local.get $n) (local.get $c)))))

  ;; tile1x4 for eight rows of B at once (a single token's matrix-vector product): eight
  ;; independent sums keep more multiply-adds in flight while the row at a is loaded once
  ;; per step. Each output's sum is formed exactly as in tile1x4 and tile2x4 (one f32x4
  ;; accumulator over t in order, then add4, then the tail): the same floats.
  (func $tile1x8 (param $a i32) (param $b i32) (param $ldb i32) (param $n i32) (param $c i32)
    (local $b1 i32) (local $b2 i32) (local $b3 i32) (local $b4 i32) (local $b5 i32) (local $b6 i32) (local $b7 i32)
    (local $x v128)
    (local $s0 v128) (local $s1 v128) (local $s2 v128) (local $s3 v128)
    (local $s4 v128) (local $s5 v128) (local $s6 v128) (local $s7 v128)
    (local $t i32) (local $n4 i32)
    (local.set $b1 (i32.add (local.get $b) (local.get $ldb)))
    (local.set $b2 (i32.add (local.get $b1) (local.get $ldb)))
    (local.set $b3 (i32.add (local.get $b2) (local.get $ldb)))
    (local.set $b4 (i32.add (local.get $b3) (local.get $ldb)))
    (local.set $b5 (i32.add (local.get $b4) (local.get $ldb)))
    (local.set $b6 (i32.add (local.get $b5) (local.get $ldb)))
    (local.set $b7 (i32.add (local.get $b6) (local.get $ldb)))
    (local.set $n4 (i32.shl (i32.and (local.get $n) (i32.const -4)) (i32.const 2)))
    (block $done
      (loop $four
        (br_if $done (i32.ge_u (local.get $t) (local.get $n4)))
        (local.set $x (v128.load (i32.add (local.get $a) (local.get $t))))
        (local.set $s0 (f32x4.add (local.get $s0) (f32x4.mul (local.get $x) (v128.load (i32.add (local.get $b) (local.get $t))))))
        (local.set $s1 (f32x4.add (local.get $s1) (f32x4.mul (local.get $x) (v128.load (i32.add (local.get $b1) (local.get $t))))))
        (local.set $s2 (f32x4.add (local.get $s2) (f32x4.mul (local.get $x) (v128.load (i32.add (local.get $b2) (local.get $t))))))
        (local.set $s3 (f32x4.add (local.get $s3) (f32x4.mul (local.get $x) (v128.load (i32.add (local.get $b3) (local.get $t))))))
        (local.set $s4 (f32x4.add (local.get $s4) (f32x4.mul (local.get $x) (v128.load (i32.add (local.get $b4) (local.get $t))))))
        (local.set $s5 (f32x4.add (local.get $s5) (f32x4.mul (local.get $x) (v128.load (i32.add (local.get $b5) (local.get $t))))))
        (local.set $s6 (f32x4.add (local.get $s6) (f32x4.mul (local.get $x) (v128.load (i32.add (local.get $b6) (local.get $t))))))
        (local.set $s7 (f32x4.add (local.get $s7) (f32x4.mul (local.get $x) (v128.load (i32.add (local.get $b7) (local.get $t))))))
        (local.set $t (i32.add (local.get $t) (i32.const 16)))
        (br $four)))
    (call $add4 (local.get $c) (local.get $s0) (local.get $s1) (local.get $s2) (local.get $s3))
    (call $add4 (i32.add (local.get $c) (i32.const 16)) (local.get $s4) (local.get $s5) (local.get $s6) (local.get $s7))
    (if (i32.and (local.get $n) (i32.const 3))
      (then
        (call $tails4 (local.get $a) (local.get $b) (local.get $ldb) (local.get $t) (local.get $n) (local.get $c))
        (call $tails4 (local.get $a) (local.get $b4) (local.get $ldb) (local.get $t) (local.get $n) (i32.add (local.get $c) (i32.const 16))))))

  ;; The scalar tail of a dot product: elements from byte offset t to 4 n of rows a and b.
  (func $tail (param $a i32) (param $b i32) (param $t i32) (param $n i32) (result f32)
    (local $s f32) (local $end i32)
    (local.set $end (i32.shl (local.get $n) (i32.const 2)))
    (block $done
      (loop $one
        (br_if $done (i32.ge_u (local.get $t) (local.get $end)))
        (local.set $s (f32.add (local.get $s) (f32.mul
          (f32.load (i32.add (local.get $a) (local.get $t)))
          (f32.load (i32.add (local.get $b) (local.get $t))))))
        (local.set $t (i32.add (local.get $t) (i32.const 4)))
        (br $one)))
    (local.get $s))

  ;; A tile of 2 rows of A (at a0 and a0 + lda) by 4 rows of B: eight sums in registers,
  ;; each of the six loads per step serving several products. Added to c (row 0) and
  ;; c + ldc (row 1), four floats each.
  (func $tile2x4 (param $a0 i32) (param $lda i32) (param $b i32) (param $ldb i32) (param $n i32)
                 (param $c i32) (param $ldc i32)
    (local $a1 i32) (local $b1 i32) (local $b2 i32) (local $b3 i32)
    (local $x0 v128) (local $x1 v128) (local $w v128)
    (local $s00 v128) (local $s01 v128) (local $s02 v128) (local $s03 v128)
    (local $s10 v128) (local $s11 v128) (local $s12 v128) (local $s13 v128)
    (local $t i32) (local $n4 i32) (local $c1 i32)
    (local.set $a1 (i32.add (local.get $a0) (local.get $lda)))
    (local.set $b1 (i32.add (local.get $b) (local.get $ldb)))
    (local.set $b2 (i32.add (local.get $b1) (local.get $ldb)))
    (local.set $b3 (i32.add (local.get $b2) (local.get $ldb)))
    (local.set $n4 (i32.shl (i32.and (local.get $n) (i32.const -4)) (i32.const 2)))
    (block $done
      (loop $four
        (br_if $done (i32.ge_u (local.get $t) (local.get $n4)))
        (local.set $x0 (v128.load (i32.add (local.get $a0) (local.get $t))))
        (local.set $x1 (v128.load (i32.add (local.get $a1) (local.get $t))))
        (local.set $w (v128.load (i32.add (local.get $b) (local.get $t))))
        (local.set $s00 (f32x4.add (local.get $s00) (f32x4.mul (local.get $x0) (local.get $w))))
        (local.set $s10 (f32x4.add (local.get $s10) (f32x4.mul (local.get $x1) (local.get $w))))
        (local.set $w (v128.load (i32.add (local.get $b1) (local.get $t))))
        (local.set $s01 (f32x4.add (local.get $s01) (f32x4.mul (local.get $x0) (local.get $w))))
        (local.set $s11 (f32x4.add (local.get $s11) (f32x4.mul (local.get $x1) (local.get $w))))
        (local.set $w (v128.load (i32.add (local.get $b2) (local.get $t))))
        (local.set $s02 (f32x4.add (local.get $s02) (f32x4.mul (local.get $x0) (local.get $w))))
        (local.set $s12 (f32x4.add (local.get $s12) (f32x4.mul (local.get $x1) (local.get $w))))
        (local.set $w (v128.load (i32.add (local.get $b3) (local.get $t))))
        (local.set $s03 (f32x4.add (local.get $s03) (f32x4.mul (local.get $x0) (local.get $w))))
        (local.set $s13 (f32x4.add (local.get $s13) (f32x4.mul (local.get $x1) (local.get $w))))
        (local.set $t (i32.add (local.get $t) (i32.const 16)))
        (br $four)))
    (local.set $c1 (i32.add (local.get $c) (local.get $ldc)))
    (call $add4 (local.get $c) (local.get $s00) (local.get $s01) (local.get $s02) (local.get $s03))
    (call $add4 (local.get $c1) (local.get $s10) (local.get $s11) (local.get $s12) (local.get $s13))
    ;; the tails (n mod 4 elements), only when n is not a multiple of four
    (if (i32.and (local.get $n) (i32.const 3))
      (then
        (call $tails4 (local.get $a0) (local.get $b) (local.get $ldb) (local.get $t) (local.get $n) (local.get $c))
        (call $tails4 (local.get $a1) (local.get $b) (local.get $ldb) (local.get $t) (local.get $n) (local.get $c1)))))

  ;; c[k] += the four lanes of s_k summed, k = 0..3: one transpose-and-add of four vectors.
  (func $add4 (param $c i32) (param $s0 v128) (param $s1 v128) (param $s2 v128) (param $s3 v128)
    (local $lo v128) (local $hi v128)
    ;; lo = (s0[0] + s0[2], s0[1] + s0[3], s1[0] + s1[2], s1[1] + s1[3]) after the shuffles
    (local.set $lo (f32x4.add
      (i8x16.shuffle 0 1 2 3 4 5 6 7 16 17 18 19 20 21 22 23 (local.get $s0) (local.get $s1))
      (i8x16.shuffle 8 9 10 11 12 13 14 15 24 25 26 27 28 29 30 31 (local.get $s0) (local.get $s1))))
    (local.set $hi (f32x4.add
      (i8x16.shuffle 0 1 2 3 4 5 6 7 16 17 18 19 20 21 22 23 (local.get $s2) (local.get $s3))
      (i8x16.shuffle 8 9 10 11 12 13 14 15 24 25 26 27 28 29 30 31 (local.get $s2) (local.get $s3))))
    ;; pairs: (lo[0] + lo[1], lo[2] + lo[3], hi[0] + hi[1], hi[2] + hi[3]) = the four sums
    (v128.store (local.get $c) (f32x4.add (v128.load (local.get $c)) (f32x4.add
      (i8x16.shuffle 0 1 2 3 8 9 10 11 16 17 18 19 24 25 26 27 (local.get $lo) (local.get $hi))
      (i8x16.shuffle 4 5 6 7 12 13 14 15 20 21 22 23 28 29 30 31 (local.get $lo) (local.get $hi))))))

  ;; c[k] += the tail (from byte offset t) of row a against row k of the four rows at b.
  (func $tails4 (param $a i32) (param $b i32) (param $ldb i32) (param $t i32) (param $n i32) (param $c i32)
    (local $k i32)
    (block $done
      (loop $row
        (br_if $done (i32.ge_u (local.get $k) (i32.const 4)))
        (f32.store (local.get $c) (f32.add (f32.load (local.get $c))
          (call $tail (local.get $a) (local.get $b) (local.get $t) (local.get $n))))
        (local.set $b (i32.add (local.get $b) (local.get $ldb)))
        (local.set $c (i32.add (local.get $c) (i32.const 4)))
        (local.set $k (i32.add (local.get $k) (i32.const 1)))
        (br $row))))

  ;; C (nA, nB) += A (nA, len) times B (nB, len) transposed: train-layers.mjs's dotRows and
  ;; transformer.mjs's linearRows. Rows of A two at a time against rows of B four at a time
  ;; (tile2x4); the rows of B left over (nB mod 4) one dot product at a time; a last row
  ;; of A (nA odd: a single token when decoding) eight rows of B at a time (tile1x8), then four.
  (func (export "dot_rows") (param $a i32) (param $nA i32) (param $b i32) (param $nB i32)
                            (param $len i32) (param $c i32)
    (local $i i32) (local $j i32) (local $lda i32) (local $ldc i32)
    (local $ai i32) (local $ci i32) (local $bj i32)
    (local.set $lda (i32.shl (local.get $len) (i32.const 2)))
    (local.set $ldc (i32.shl (local.get $nB) (i32.const 2)))
    (block $pairs_done
      (loop $pairs
        (br_if $pairs_done (i32.gt_u (i32.add (local.get $i) (i32.const 2)) (local.get $nA)))
        (local.set $ai (i32.add (local.get $a) (i32.mul (local.get $i) (local.get $lda))))
        (local.set $ci (i32.add (local.get $c) (i32.mul (local.get $i) (local.get $ldc))))
        (local.set $j (i32.const 0))
        (block $quads_done
          (loop $quads
            (br_if $quads_done (i32.gt_u (i32.add (local.get $j) (i32.const 4)) (local.get $nB)))
            (call $tile2x4 (local.get $ai) (local.get $lda)
              (i32.add (local.get $b) (i32.mul (local.get $j) (local.get $lda))) (local.get $lda)
              (local.get $len) (i32.add (local.get $ci) (i32.shl (local.get $j) (i32.const 2))) (local.get $ldc))
            (local.set $j (i32.add (local.get $j) (i32.const 4)))
            (br $quads)))
        (block $rest_done
          (loop $rest
            (br_if $rest_done (i32.ge_u (local.get $j) (local.get $nB)))
            (local.set $bj (i32.add (local.get $b) (i32.mul (local.get $j) (local.get $lda))))
            (call $dot_into (i32.add (local.get $ci) (i32.shl (local.get $j) (i32.const 2)))
              (local.get $ai) (local.get $bj) (local.get $len))
            (call $dot_into (i32.add (i32.add (local.get $ci) (local.get $ldc)) (i32.shl (local.get $j) (i32.const 2)))
              (i32.add (local.get $ai) (local.get $lda)) (local.get $bj) (local.get $len))
            (local.set $j (i32.add (local.get $j) (i32.const 1)))
            (br $rest)))
        (local.set $i (i32.add (local.get $i) (i32.const 2)))
        (br $pairs)))
    ;; the last row of A, when nA is odd
    (if (i32.lt_u (local.get $i) (local.get $nA))
      (then
        (local.set $ai (i32.add (local.get $a) (i32.mul (local.get $i) (local.get $lda))))
        (local.set $ci (i32.add (local.get $c) (i32.mul (local.get $i) (local.get $ldc))))
        (local.set $j (i32.const 0))
        (block $octs_done
          (loop $octs
            (br_if $octs_done (i32.gt_u (i32.add (local.get $j) (i32.const 8)) (local.get $nB)))
            (call $tile1x8 (local.get $ai) (i32.add (local.get $b) (i32.mul (local.get $j) (local.get $lda)))
              (local.get $lda) (local.get $len) (i32.add (local.get $ci) (i32.shl (local.get $j) (i32.const 2))))
            (local.set $j (i32.add (local.get $j) (i32.const 8)))
            (br $octs)))
        (block $quads_done
          (loop $quads
            (br_if $quads_done (i32.gt_u (i32.add (local.get $j) (i32.const 4)) (local.get $nB)))
            (call $tile1x4 (local.get $ai) (i32.add (local.get $b) (i32.mul (local.get $j) (local.get $lda)))
              (local.get $lda) (local.get $len) (i32.add (local.get $ci) (i32.shl (local.get $j) (i32.const 2))))
            (local.set $j (i32.add (local.get $j) (i32.const 4)))
            (br $quads)))
        (block $rest_done
          (loop $rest
            (br_if $rest_done (i32.ge_u (local.get $j) (local.get $nB)))
            (call $dot_into (i32.add (local.get $ci) (i32.shl (local.get $j) (i32.const 2)))
              (local.get $ai) (i32.add (local.get $b) (i32.mul (local.get $j) (local.get $lda))) (local.get $len))
            (local.set $j (i32.add (local.get $j) (i32.const 1)))
            (br $rest))))))

  ;; The float at c += x.
  (func $add1 (param $c i32) (param $x f32)
    (f32.store (local.get $c) (f32.add (f32.load (local.get $c)) (local.get $x))))

  ;; C (m, nOut) += A^T B, A (n, m) and B (n, nOut) both row-major: the weight gradient
  ;; dW = x^T g of a linear layer, summed over the n rows without transposing anything.
  ;; A tile of 4 rows of C by 8 columns (eight f32x4 sums) runs down the n rows: each step
  ;; loads 8 floats of a row of B (two vectors) and 4 floats of the same row of A, each
  ;; splat to four lanes (v128.load32_splat), and does 32 multiply-adds. The columns left
  ;; over (nOut mod 8) and the rows left over (m mod 4) go one float at a time.
  (func (export "dot_cols") (param $a i32) (param $n i32) (param $m i32) (param $b i32)
                            (param $nOut i32) (param $c i32)
    (local $p i32) (local $j i32) (local $i i32) (local $ai i32) (local $bi i32)
    (local $lda i32) (local $ldb i32) (local $cp i32) (local $s f32)
    (local $w0 v128) (local $w1 v128) (local $x v128)
    (local $s00 v128) (local $s01 v128) (local $s10 v128) (local $s11 v128)
    (local $s20 v128) (local $s21 v128) (local $s30 v128) (local $s31 v128)
    (local.set $lda (i32.shl (local.get $m) (i32.const 2)))
    (local.set $ldb (i32.shl (local.get $nOut) (i32.const 2)))
    (block $p_done
      (loop $p_loop
        (br_if $p_done (i32.gt_u (i32.add (local.get $p) (i32.const 4)) (local.get $m)))
        (local.set $j (i32.const 0))
        (block $j_done
          (loop $j_loop
            (br_if $j_done (i32.gt_u (i32.add (local.get $j) (i32.const 8)) (local.get $nOut)))
            (local.set $s00 (v128.const f32x4 0 0 0 0)) (local.set $s01 (v128.const f32x4 0 0 0 0))
            (local.set $s10 (v128.const f32x4 0 0 0 0)) (local.set $s11 (v128.const f32x4 0 0 0 0))
            (local.set $s20 (v128.const f32x4 0 0 0 0)) (local.set $s21 (v128.const f32x4 0 0 0 0))
            (local.set $s30 (v128.const f32x4 0 0 0 0)) (local.set $s31 (v128.const f32x4 0 0 0 0))
            ;; ai: A[0, p]; bi: B[0, j]; both step down one row per i
            (local.set $ai (i32.add (local.get $a) (i32.shl (local.get $p) (i32.const 2))))
            (local.set $bi (i32.add (local.get $b) (i32.shl (local.get $j) (i32.const 2))))
            (local.set $i (i32.const 0))
            (block $i_done
              (loop $i_loop
                (br_if $i_done (i32.ge_u (local.get $i) (local.get $n)))
                (local.set $w0 (v128.load offset=0 (local.get $bi)))
                (local.set $w1 (v128.load offset=16 (local.get $bi)))
                (local.set $x (v128.load32_splat offset=0 (local.get $ai)))
                (local.set $s00 (f32x4.add (local.get $s00) (f32x4.mul (local.get $x) (local.get $w0))))
                (local.set $s01 (f32x4.add (local.get $s01) (f32x4.mul (local.get $x) (local.get $w1))))
                (local.set $x (v128.load32_splat offset=4 (local.get $ai)))
                (local.set $s10 (f32x4.add (local.get $s10) (f32x4.mul (local.get $x) (local.get $w0))))
                (local.set $s11 (f32x4.add (local.get $s11) (f32x4.mul (local.get $x) (local.get $w1))))
                (local.set $x (v128.load32_splat offset=8 (local.get $ai)))
                (local.set $s20 (f32x4.add (local.get $s20) (f32x4.mul (local.get $x) (local.get $w0))))
                (local.set $s21 (f32x4.add (local.get $s21) (f32x4.mul (local.get $x) (local.get $w1))))
                (local.set $x (v128.load32_splat offset=12 (local.get $ai)))
                (local.set $s30 (f32x4.add (local.get $s30) (f32x4.mul (local.get $x) (local.get $w0))))
                (local.set $s31 (f32x4.add (local.get $s31) (f32x4.mul (local.get $x) (local.get $w1))))
                (local.set $ai (i32.add (local.get $ai) (local.get $lda)))
                (local.set $bi (i32.add (local.get $bi) (local.get $ldb)))
                (local.set $i (i32.add (local.get $i) (i32.const 1)))
                (br $i_loop)))
            ;; C[p + r, j .. j + 8] += s_r0, s_r1
            (local.set $cp (i32.add (local.get $c) (i32.shl (i32.add (i32.mul (local.get $p) (local.get $nOut)) (local.get $j)) (i32.const 2))))
            (call $add8 (local.get $cp) (local.get $s00) (local.get $s01))
            (local.set $cp (i32.add (local.get $cp) (local.get $ldb)))
            (call $add8 (local.get $cp) (local.get $s10) (local.get $s11))
            (local.set $cp (i32.add (local.get $cp) (local.get $ldb)))
            (call $add8 (local.get $cp) (local.get $s20) (local.get $s21))
            (local.set $cp (i32.add (local.get $cp) (local.get $ldb)))
            (call $add8 (local.get $cp) (local.get $s30) (local.get $s31))
            (local.set $j (i32.add (local.get $j) (i32.const 8)))
            (br $j_loop)))
        ;; the columns left over, for these four rows
        (call $cols_scalar (local.get $a) (local.get $n) (local.get $m) (local.get $b) (local.get $nOut) (local.get $c)
          (local.get $p) (i32.add (local.get $p) (i32.const 4)) (local.get $j))
        (local.set $p (i32.add (local.get $p) (i32.const 4)))
        (br $p_loop)))
    ;; the rows left over, every column
    (call $cols_scalar (local.get $a) (local.get $n) (local.get $m) (local.get $b) (local.get $nOut) (local.get $c)
      (local.get $p) (local.get $m) (i32.const 0)))

  ;; Eight floats at c += two vectors.
  (func $add8 (param $c i32) (param $x v128) (param $y v128)
    (v128.store offset=0 (local.get $c) (f32x4.add (v128.load offset=0 (local.get $c)) (local.get $x)))
    (v128.store offset=16 (local.get $c) (f32x4.add (v128.load offset=16 (local.get $c)) (local.get $y))))

  ;; dot_cols one float at a time, for rows p0 .. p1 of C and columns j0 .. nOut.
  (func $cols_scalar (param $a i32) (param $n i32) (param $m i32) (param $b i32) (param $nOut i32)
                     (param $c i32) (param $p0 i32) (param $p1 i32) (param $j0 i32)
    (local $p i32) (local $j i32) (local $i i32) (local $s f32) (local $cp i32)
    (local.set $p (local.get $p0))
    (block $p_done
      (loop $p_loop
        (br_if $p_done (i32.ge_u (local.get $p) (local.get $p1)))
        (local.set $j (local.get $j0))
        (block $j_done
          (loop $j_loop
            (br_if $j_done (i32.ge_u (local.get $j) (local.get $nOut)))
            (local.set $s (f32.const 0))
            (local.set $i (i32.const 0))
            (block $i_done
              (loop $i_loop
                (br_if $i_done (i32.ge_u (local.get $i) (local.get $n)))
                (local.set $s (f32.add (local.get $s) (f32.mul
                  (f32.load (i32.add (local.get $a) (i32.shl (i32.add (i32.mul (local.get $i) (local.get $m)) (local.get $p)) (i32.const 2))))
                  (f32.load (i32.add (local.get $b) (i32.shl (i32.add (i32.mul (local.get $i) (local.get $nOut)) (local.get $j)) (i32.const 2)))))))
                (local.set $i (i32.add (local.get $i) (i32.const 1)))
                (br $i_loop)))
            (local.set $cp (i32.add (local.get $c) (i32.shl (i32.add (i32.mul (local.get $p) (local.get $nOut)) (local.get $j)) (i32.const 2))))
            (f32.store (local.get $cp) (f32.add (f32.load (local.get $cp)) (local.get $s)))
            (local.set $j (i32.add (local.get $j) (i32.const 1)))
            (br $j_loop)))
        (local.set $p (i32.add (local.get $p) (i32.const 1)))
        (br $p_loop))))

;; e^x in float32, for x <= 0 (a softmax's shifted scores), four lanes at once:
  ;; x = n ln 2 + r with n an integer and |r| <= ln 2 / 2, e^r by Cephes' expf polynomial
  ;; (relative error ~1e-7, a float32 rounding), times 2^n built in the exponent bits, as
  ;; 2^(n - h) 2^h with h = n / 2: both factors are normal floats, so a result in float32's
  ;; subnormal range (x from -87.3 down to -103.9) is rounded once, at the last product,
  ;; as Math.exp's is. Below -104 (and at -infinity) the result is 0; NaN stays NaN.
  (func $exp4 (param $x v128) (result v128)
    (local $n v128) (local $r v128) (local $p v128) (local $ni v128) (local $h v128)
    (local.set $n (f32x4.nearest (f32x4.mul (local.get $x) (v128.const f32x4 1.44269504 1.44269504 1.44269504 1.44269504))))
    ;; r = x - n ln2, ln 2 in two parts (0.693359375 exactly, then the rest) to keep r exact
    (local.set $r (f32x4.sub (local.get $x) (f32x4.mul (local.get $n) (v128.const f32x4 0.693359375 0.693359375 0.693359375 0.693359375))))
    (local.set $r (f32x4.sub (local.get $r) (f32x4.mul (local.get $n) (v128.const f32x4 -2.12194440e-4 -2.12194440e-4 -2.12194440e-4 -2.12194440e-4))))
    ;; p = ((((c5 r + c4) r + c3) r + c2) r + c1) r + c0, then e^r = 1 + r + r^2 p
    (local.set $p (v128.const f32x4 1.9875691500e-4 1.9875691500e-4 1.9875691500e-4 1.9875691500e-4))
    (local.set $p (f32x4.add (f32x4.mul (local.get $p) (local.get $r)) (v128.const f32x4 1.3981999507e-3 1.3981999507e-3 1.3981999507e-3 1.3981999507e-3)))
    (local.set $p (f32x4.add (f32x4.mul (local.get $p) (local.get $r)) (v128.const f32x4 8.3334519073e-3 8.3334519073e-3 8.3334519073e-3 8.3334519073e-3)))
    (local.set $p (f32x4.add (f32x4.mul (local.get $p) (local.get $r)) (v128.const f32x4 4.1665795894e-2 4.1665795894e-2 4.1665795894e-2 4.1665795894e-2)))
    (local.set $p (f32x4.add (f32x4.mul (local.get $p) (local.get $r)) (v128.const f32x4 1.6666665459e-1 1.6666665459e-1 1.6666665459e-1 1.6666665459e-1)))
    (local.set $p (f32x4.add (f32x4.mul (local.get $p) (local.get $r)) (v128.const f32x4 5.0000001201e-1 5.0000001201e-1 5.0000001201e-1 5.0000001201e-1)))
    (local.set $p (f32x4.add (f32x4.add (f32x4.mul (f32x4.mul (local.get $p) (local.get $r)) (local.get $r)) (local.get $r))
      (v128.const f32x4 1 1 1 1)))
    ;; times 2^(n - h), then 2^h: (k + 127) << 23 are the bits of the float 2^k
    (local.set $ni (i32x4.trunc_sat_f32x4_s (local.get $n)))
    (local.set $h (i32x4.shr_s (local.get $ni) (i32.const 1)))
    (local.set $p (f32x4.mul (local.get $p)
      (i32x4.shl (i32x4.add (i32x4.sub (local.get $ni) (local.get $h)) (v128.const i32x4 127 127 127 127)) (i32.const 23))))
    (local.set $p (f32x4.mul (local.get $p)
      (i32x4.shl (i32x4.add (local.get $h) (v128.const i32x4 127 127 127 127)) (i32.const 23))))
    ;; 0 where x < -104 (and for x = -infinity); a NaN (not less than anything) passes
    (v128.andnot (local.get $p) (f32x4.lt (local.get $x) (v128.const f32x4 -104 -104 -104 -104))))

  ;; Softmax of each of `rows` rows of S floats at p, in place: subtract the row's maximum,
  ;; e^x four at a time ($exp4; the last S mod 4 in a vector padded with -infinity, whose
  ;; e^x is 0), divide by the sum of the row. The sum is in float32, four lanes then added.
  (func $softmax_rows (export "softmax_rows") (param $p i32) (param $rows i32) (param $S i32)
    (local $row i32) (local $end i32) (local $e4 i32) (local $i i32) (local $max f32)
    (local $m v128) (local $acc v128) (local $v v128) (local $sum f32) (local $inv v128) (local $k i32)
    (block $rows_done
      (loop $rows_loop
        (br_if $rows_done (i32.ge_u (local.get $row) (local.get $rows)))
        (local.set $end (i32.add (local.get $p) (i32.shl (local.get $S) (i32.const 2))))
        (local.set $e4 (i32.add (local.get $p) (i32.shl (i32.and (local.get $S) (i32.const -4)) (i32.const 2))))
        ;; the maximum, one float at a time
        (local.set $max (f32.const -inf))
        (local.set $i (local.get $p))
        (block $max_done
          (loop $max_loop
            (br_if $max_done (i32.ge_u (local.get $i) (local.get $end)))
            (local.set $max (f32.max (local.get $max) (f32.load (local.get $i))))
            (local.set $i (i32.add (local.get $i) (i32.const 4)))
            (br $max_loop)))
        (local.set $m (f32x4.splat (local.get $max)))
        ;; e^(x - max), four at a time, summed in $acc
        (local.set $acc (v128.const f32x4 0 0 0 0))
        (local.set $i (local.get $p))
        (block $exp_done
          (loop $exp_loop
            (br_if $exp_done (i32.ge_u (local.get $i) (local.get $e4)))
            (local.set $v (call $exp4 (f32x4.sub (v128.load (local.get $i)) (local.get $m))))
            (v128.store (local.get $i) (local.get $v))
            (local.set $acc (f32x4.add (local.get $acc) (local.get $v)))
            (local.set $i (i32.add (local.get $i) (i32.const 16)))
            (br $exp_loop)))
        ;; the tail: up to three floats, through lanes of one vector
        (if (i32.lt_u (local.get $e4) (local.get $end))
          (then
            (local.set $v (v128.const f32x4 -inf -inf -inf -inf))
            (local.set $k (i32.const 0))
            (local.set $i (local.get $e4))
            (block $t_done
              (loop $t_loop
                (br_if $t_done (i32.ge_u (local.get $i) (local.get $end)))
                (if (i32.eq (local.get $k) (i32.const 0)) (then (local.set $v (f32x4.replace_lane 0 (local.get $v) (f32.load (local.get $i))))))
                (if (i32.eq (local.get $k) (i32.const 1)) (then (local.set $v (f32x4.replace_lane 1 (local.get $v) (f32.load (local.get $i))))))
                (if (i32.eq (local.get $k) (i32.const 2)) (then (local.set $v (f32x4.replace_lane 2 (local.get $v) (f32.load (local.get $i))))))
                (local.set $k (i32.add (local.get $k) (i32.const 1)))
                (local.set $i (i32.add (local.get $i) (i32.const 4)))
                (br $t_loop)))
            (local.set $v (call $exp4 (f32x4.sub (local.get $v) (local.get $m))))
            (local.set $acc (f32x4.add (local.get $acc) (local.get $v)))
            (f32.store (local.get $e4) (f32x4.extract_lane 0 (local.get $v)))
            (if (i32.ge_u (local.get $k) (i32.const 2)) (then (f32.store offset=4 (local.get $e4) (f32x4.extract_lane 1 (local.get $v)))))
            (if (i32.ge_u (local.get $k) (i32.const 3)) (then (f32.store offset=8 (local.get $e4) (f32x4.extract_lane 2 (local.get $v)))))))
        ;; divide by the sum
        (local.set $inv (f32x4.splat (call $hsum (local.get $acc))))
        (local.set $i (local.get $p))
        (block $div_done
          (loop $div_loop
            (br_if $div_done (i32.ge_u (local.get $i) (local.get $e4)))
            (v128.store (local.get $i) (f32x4.div (v128.load (local.get $i)) (local.get $inv)))
            (local.set $i (i32.add (local.get $i) (i32.const 16)))
            (br $div_loop)))
        (block $div_tail_done
          (loop $div_tail
            (br_if $div_tail_done (i32.ge_u (local.get $i) (local.get $end)))
            (f32.store (local.get $i) (f32.div (f32.load (local.get $i)) (f32x4.extract_lane 0 (local.get $inv))))
            (local.set $i (i32.add (local.get $i) (i32.const 4)))
            (br $div_tail)))
        (local.set $p (local.get $end))
        (local.set $row (i32.add (local.get $row) (i32.const 1)))
        (br $rows_loop))))

  ;; GELU for training, four floats at a time (train-layers.mjs's geluForward on float32):
  ;; y = x Phi(x), Phi(x) = (1 + erf(x / sqrt 2)) / 2 with erf by Abramowitz and Stegun
  ;; 7.1.26 (within 1.5e-7), and, for the backward pass, cdf = Phi(x) and pdf = phi(x),
  ;; the normal density, whose e^(-x^2 / 2) the erf formula shares. n a multiple of 4.
  (func (export "gelu_forward") (param $x i32) (param $y i32) (param $cdf i32) (param $pdf i32) (param $n i32)
    (local $end i32) (local $v v128) (local $e v128) (local $t v128) (local $r v128) (local $phi v128)
    (local.set $end (i32.add (local.get $x) (i32.shl (local.get $n) (i32.const 2))))
    (block $done
      (loop $four
        (br_if $done (i32.ge_u (local.get $x) (local.get $end)))
        (local.set $v (v128.load (local.get $x)))
        ;; e = exp(-v^2 / 2)
        (local.set $e (call $exp4 (f32x4.mul (f32x4.mul (local.get $v) (local.get $v)) (v128.const f32x4 -0.5 -0.5 -0.5 -0.5))))
        ;; t = 1 / (1 + 0.3275911 |v| / sqrt 2)
        (local.set $t (f32x4.div (v128.const f32x4 1 1 1 1) (f32x4.add (v128.const f32x4 1 1 1 1)
          (f32x4.mul (f32x4.abs (local.get $v)) (v128.const f32x4 0.23164189 0.23164189 0.23164189 0.23164189)))))
        ;; r = ((((a5 t + a4) t + a3) t + a2) t + a1) t e = 1 - erf(|v| / sqrt 2), and
        ;; Phi(v) = r / 2 for v < 0, 1 - r / 2 otherwise: for v far below 0, Phi is r / 2
        ;; to float32's relative precision, where 0.5 (1 - erf) would cancel to 0
        (local.set $r (f32x4.add (f32x4.mul (v128.const f32x4 1.061405429 1.061405429 1.061405429 1.061405429) (local.get $t))
          (v128.const f32x4 -1.453152027 -1.453152027 -1.453152027 -1.453152027)))
        (local.set $r (f32x4.add (f32x4.mul (local.get $r) (local.get $t)) (v128.const f32x4 1.421413741 1.421413741 1.421413741 1.421413741)))
        (local.set $r (f32x4.add (f32x4.mul (local.get $r) (local.get $t)) (v128.const f32x4 -0.284496736 -0.284496736 -0.284496736 -0.284496736)))
        (local.set $r (f32x4.add (f32x4.mul (local.get $r) (local.get $t)) (v128.const f32x4 0.254829592 0.254829592 0.254829592 0.254829592)))
        (local.set $r (f32x4.mul (f32x4.mul (f32x4.mul (local.get $r) (local.get $t)) (local.get $e)) (v128.const f32x4 0.5 0.5 0.5 0.5)))
        (local.set $phi (v128.bitselect (local.get $r) (f32x4.sub (v128.const f32x4 1 1 1 1) (local.get $r))
          (f32x4.lt (local.get $v) (v128.const f32x4 0 0 0 0))))
        (v128.store (local.get $y) (f32x4.mul (local.get $v) (local.get $phi)))
        (v128.store (local.get $cdf) (local.get $phi))
        (v128.store (local.get $pdf) (f32x4.mul (local.get $e) (v128.const f32x4 0.39894228 0.39894228 0.39894228 0.39894228)))
        (local.set $x (i32.add (local.get $x) (i32.const 16)))
        (local.set $y (i32.add (local.get $y) (i32.const 16)))
        (local.set $cdf (i32.add (local.get $cdf) (i32.const 16)))
        (local.set $pdf (i32.add (local.get $pdf) (i32.const 16)))
        (br $four))))

    ;; Attention of one query over S cached positions, first half: the scores.
  ;; q: nHeads * hd floats; keys: S rows of nKv * hd floats (the KV cache); out: nHeads
  ;; rows of S floats, out[h][s] = scale q_h . k_s (of key head h / group).
  ;; Grouped-query heads: each key row is loaded once and met by every query head of its
  ;; group. Needs hd a multiple of 4 (simd.mjs checks).
  (func (export "attend_scores") (param $q i32) (param $k i32) (param $S i32) (param $nHeads i32)
                                 (param $nKv i32) (param $hd i32) (param $scale f32) (param $out i32)
    (local $group i32) (local $g i32) (local $s i32) (local $m i32) (local $e i32)
    (local $kRow i32) (local $width i32) (local $hdB i32) (local $h i32) (local $acc v128)
    (local.set $group (i32.div_u (local.get $nHeads) (local.get $nKv)))
    (local.set $hdB (i32.shl (local.get $hd) (i32.const 2)))
    (local.set $width (i32.mul (local.get $nKv) (local.get $hdB)))
    (block $g_done
      (loop $g_loop
        (br_if $g_done (i32.ge_u (local.get $g) (local.get $nKv)))
        (local.set $s (i32.const 0))
        (block $s_done
          (loop $s_loop
            (br_if $s_done (i32.ge_u (local.get $s) (local.get $S)))
            (local.set $kRow (i32.add (i32.add (local.get $k) (i32.mul (local.get $s) (local.get $width)))
              (i32.mul (local.get $g) (local.get $hdB))))
            ;; each query head m of the group against this key row (in the cache: L1)
            (local.set $m (i32.const 0))
            (block $m_done
              (loop $m_loop
                (br_if $m_done (i32.ge_u (local.get $m) (local.get $group)))
                (local.set $h (i32.add (i32.mul (local.get $g) (local.get $group)) (local.get $m)))
                (local.set $acc (v128.const f32x4 0 0 0 0))
                (local.set $e (i32.const 0))
                (block $e_done
                  (loop $e_loop
                    (br_if $e_done (i32.ge_u (local.get $e) (local.get $hdB)))
                    (local.set $acc (f32x4.add (local.get $acc) (f32x4.mul
                      (v128.load (i32.add (i32.add (local.get $q) (i32.mul (local.get $h) (local.get $hdB))) (local.get $e)))
                      (v128.load (i32.add (local.get $kRow) (local.get $e))))))
                    (local.set $e (i32.add (local.get $e) (i32.const 16)))
                    (br $e_loop)))
                (f32.store (i32.add (local.get $out) (i32.shl (i32.add (i32.mul (local.get $h) (local.get $S)) (local.get $s)) (i32.const 2)))
                  (f32.mul (call $hsum (local.get $acc)) (local.get $scale)))
                (local.set $m (i32.add (local.get $m) (i32.const 1)))
                (br $m_loop)))
            (local.set $s (i32.add (local.get $s) (i32.const 1)))
            (br $s_loop)))
        (local.set $g (i32.add (local.get $g) (i32.const 1)))
        (br $g_loop))))

  ;; Second half: the weighted sum of the values. p: nHeads rows of S weights (the softmax
  ;; of the scores); values: S rows of nKv * hd; ctx (nHeads * hd) = sum_s p[h][s] v_s (of
  ;; head h / group), written (not added). Each value row is loaded once per group.
  (func (export "attend_values") (param $p i32) (param $v i32) (param $S i32) (param $nHeads i32)
                                 (param $nKv i32) (param $hd i32) (param $ctx i32)
    (local $group i32) (local $g i32) (local $s i32) (local $m i32) (local $e i32) (local $h i32)
    (local $vRow i32) (local $width i32) (local $hdB i32) (local $w v128) (local $dst i32)
    (local.set $group (i32.div_u (local.get $nHeads) (local.get $nKv)))
    (local.set $hdB (i32.shl (local.get $hd) (i32.const 2)))
    (local.set $width (i32.mul (local.get $nKv) (local.get $hdB)))
    ;; ctx = 0
    (local.set $e (i32.const 0))
    (block $z_done
      (loop $z
        (br_if $z_done (i32.ge_u (local.get $e) (i32.mul (local.get $nHeads) (local.get $hdB))))
        (v128.store (i32.add (local.get $ctx) (local.get $e)) (v128.const f32x4 0 0 0 0))
        (local.set $e (i32.add (local.get $e) (i32.const 16)))
        (br $z)))
    (block $g_done
      (loop $g_loop
        (br_if $g_done (i32.ge_u (local.get $g) (local.get $nKv)))
        (local.set $s (i32.const 0))
        (block $s_done
          (loop $s_loop
            (br_if $s_done (i32.ge_u (local.get $s) (local.get $S)))
            (local.set $vRow (i32.add (i32.add (local.get $v) (i32.mul (local.get $s) (local.get $width)))
              (i32.mul (local.get $g) (local.get $hdB))))
            (local.set $m (i32.const 0))
            (block $m_done
              (loop $m_loop
                (br_if $m_done (i32.ge_u (local.get $m) (local.get $group)))
                (local.set $h (i32.add (i32.mul (local.get $g) (local.get $group)) (local.get $m)))
                ;; w = p[h][s] in all four lanes
                (local.set $w (f32x4.splat (f32.load (i32.add (local.get $p)
                  (i32.shl (i32.add (i32.mul (local.get $h) (local.get $S)) (local.get $s)) (i32.const 2))))))
                (local.set $dst (i32.add (local.get $ctx) (i32.mul (local.get $h) (local.get $hdB))))
                (local.set $e (i32.const 0))
                (block $e_done
                  (loop $e_loop
                    (br_if $e_done (i32.ge_u (local.get $e) (local.get $hdB)))
                    (v128.store (i32.add (local.get $dst) (local.get $e)) (f32x4.add
                      (v128.load (i32.add (local.get $dst) (local.get $e)))
                      (f32x4.mul (local.get $w) (v128.load (i32.add (local.get $vRow) (local.get $e))))))
                    (local.set $e (i32.add (local.get $e) (i32.const 16)))
                    (br $e_loop)))
                (local.set $m (i32.add (local.get $m) (i32.const 1)))
                (br $m_loop)))
            (local.set $s (i32.add (local.get $s) (i32.const 1)))
            (br $s_loop)))
        (local.set $g (i32.add (local.get $g) (i32.const 1)))
        (br $g_loop))))

  ;; ---------------------------------------------------------------------------------
  ;; GGUF's quantized matrices, read in place (SmolLM2: Q4_1 matrices, a Q8_0 embedding).
  ;; A row of the matrix (cols numbers, one output unit) is cols / 32 blocks, one after the
  ;; other, the rows one after the other; a block's two scales are float16 numbers, turned
  ;; into float32 by a table of all 65,536 of them at `half` (simd.mjs writes it once).
  ;;   Q4_1, 20 bytes: d (f16), m (f16), 16 bytes qs; weight j = (qs[j] & 15) d + m and
  ;;         weight j + 16 = (qs[j] >> 4) d + m (low nibbles first, then high nibbles);
  ;;   Q8_0, 34 bytes: d (f16), 32 int8 q; weight j = q[j] d.
  ;; out[r] = row r . x. Per block, the codes' dot product with x's 32 numbers is formed
  ;; first (codes are small integers: exact in float32) and scaled once: for Q4_1,
  ;; d (q . x) + m (sum of x), the sums of x's blocks computed once per call into xsum.
  ;; The same sum as dequantize-then-dot, in another order: equal within float32 rounding
  ;; (tests/js/quant-gguf.test.mjs; quant.mjs's matvecGGML, in double, is the reference).

  ;; The float16 at byte address `at`, as float32 (the table at `tab`).
  (func $half (param $tab i32) (param $at i32) (result f32)
    (f32.load (i32.add (local.get $tab) (i32.shl (i32.load16_u (local.get $at)) (i32.const 2)))))

  ;; xsum[b] = the sum of x's block b (32 floats), for b < nb.
  (func $block_sums (param $x i32) (param $nb i32) (param $xsum i32)
    (local $b i32) (local $v v128)
    (block $done
      (loop $each
        (br_if $done (i32.ge_u (local.get $b) (local.get $nb)))
        (local.set $v (f32x4.add
          (f32x4.add (f32x4.add (v128.load (local.get $x)) (v128.load offset=16 (local.get $x)))
                     (f32x4.add (v128.load offset=32 (local.get $x)) (v128.load offset=48 (local.get $x))))
          (f32x4.add (f32x4.add (v128.load offset=64 (local.get $x)) (v128.load offset=80 (local.get $x)))
                     (f32x4.add (v128.load offset=96 (local.get $x)) (v128.load offset=112 (local.get $x))))))
        (f32.store (i32.add (local.get $xsum) (i32.shl (local.get $b) (i32.const 2))) (call $hsum (local.get $v)))
        (local.set $x (i32.add (local.get $x) (i32.const 128)))
        (local.set $b (i32.add (local.get $b) (i32.const 1)))
        (br $each))))

  ;; out (rows floats) = W x, W a Q4_1 matrix at w (rows of cols numbers, cols a multiple
  ;; of 32), x (cols floats) at x; xsum: room for cols / 32 floats; half: the f16 table.
  (func (export "matvec_q4_1") (param $w i32) (param $rows i32) (param $cols i32) (param $x i32)
                               (param $xsum i32) (param $half i32) (param $out i32)
    (local $nb i32) (local $r i32) (local $b i32) (local $xb i32) (local $q v128)
    (local $acc v128) (local $macc f32) (local $mask v128) (local $lo v128) (local $hi v128) (local $s v128)
    (local.set $nb (i32.shr_u (local.get $cols) (i32.const 5)))
    (call $block_sums (local.get $x) (local.get $nb) (local.get $xsum))
    (local.set $mask (i8x16.splat (i32.const 15)))
    (block $rows_done
      (loop $row
        (br_if $rows_done (i32.ge_u (local.get $r) (local.get $rows)))
        (local.set $acc (v128.const f32x4 0 0 0 0))
        (local.set $macc (f32.const 0))
        (local.set $b (i32.const 0))
        (local.set $xb (local.get $x))
        (block $blocks_done
          (loop $block
            (br_if $blocks_done (i32.ge_u (local.get $b) (local.get $nb)))
            (local.set $q (v128.load offset=4 (local.get $w)))
            ;; the low nibbles (numbers 0..15 of the block) as four u16x8 halves: lo, hi
            (local.set $lo (i16x8.extend_low_i8x16_u (v128.and (local.get $q) (local.get $mask))))
            (local.set $hi (i16x8.extend_high_i8x16_u (v128.and (local.get $q) (local.get $mask))))
            (local.set $s (f32x4.add
              (f32x4.add
                (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_low_i16x8_u (local.get $lo))) (v128.load (local.get $xb)))
                (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_high_i16x8_u (local.get $lo))) (v128.load offset=16 (local.get $xb))))
              (f32x4.add
                (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_low_i16x8_u (local.get $hi))) (v128.load offset=32 (local.get $xb)))
                (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_high_i16x8_u (local.get $hi))) (v128.load offset=48 (local.get $xb))))))
            ;; the high nibbles (numbers 16..31)
            (local.set $lo (i16x8.extend_low_i8x16_u (i8x16.shr_u (local.get $q) (i32.const 4))))
            (local.set $hi (i16x8.extend_high_i8x16_u (i8x16.shr_u (local.get $q) (i32.const 4))))
            (local.set $s (f32x4.add (local.get $s) (f32x4.add
              (f32x4.add
                (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_low_i16x8_u (local.get $lo))) (v128.load offset=64 (local.get $xb)))
                (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_high_i16x8_u (local.get $lo))) (v128.load offset=80 (local.get $xb))))
              (f32x4.add
                (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_low_i16x8_u (local.get $hi))) (v128.load offset=96 (local.get $xb)))
                (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_high_i16x8_u (local.get $hi))) (v128.load offset=112 (local.get $xb)))))))
            ;; acc += d (codes . x), in four lanes
            (local.set $acc (f32x4.add (local.get $acc) (f32x4.mul
              (f32x4.splat (f32.load (i32.add (local.get $half) (i32.shl (i32.load16_u (local.get $w)) (i32.const 2)))))
              (local.get $s))))
            ;; + m (the sum of x's block)
            (local.set $macc (f32.add (local.get $macc) (f32.mul
              (f32.load (i32.add (local.get $half) (i32.shl (i32.load16_u offset=2 (local.get $w)) (i32.const 2))))
              (f32.load (i32.add (local.get $xsum) (i32.shl (local.get $b) (i32.const 2)))))))
            (local.set $w (i32.add (local.get $w) (i32.const 20)))
            (local.set $xb (i32.add (local.get $xb) (i32.const 128)))
            (local.set $b (i32.add (local.get $b) (i32.const 1)))
            (br $block)))
        (f32.store (i32.add (local.get $out) (i32.shl (local.get $r) (i32.const 2)))
          (f32.add (call $hsum (local.get $acc)) (local.get $macc)))
        (local.set $r (i32.add (local.get $r) (i32.const 1)))
        (br $row))))

  ;; out (rows floats) = W x, W a Q8_0 matrix at w (rows of cols numbers, cols a multiple
  ;; of 32), x (cols floats) at x; half: the f16 table.
  (func (export "matvec_q8_0") (param $w i32) (param $rows i32) (param $cols i32) (param $x i32)
                               (param $half i32) (param $out i32)
    (local $nb i32) (local $r i32) (local $b i32) (local $xb i32) (local $acc v128)
    (local $lo v128) (local $hi v128) (local $s v128)
    (local.set $nb (i32.shr_u (local.get $cols) (i32.const 5)))
    (block $rows_done
      (loop $row
        (br_if $rows_done (i32.ge_u (local.get $r) (local.get $rows)))
        (local.set $acc (v128.const f32x4 0 0 0 0))
        (local.set $b (i32.const 0))
        (local.set $xb (local.get $x))
        (block $blocks_done
          (loop $block
            (br_if $blocks_done (i32.ge_u (local.get $b) (local.get $nb)))
            ;; codes 0..15, then 16..31 (int8, widened to int32 and converted)
            (local.set $lo (i16x8.extend_low_i8x16_s (v128.load offset=2 (local.get $w))))
            (local.set $hi (i16x8.extend_high_i8x16_s (v128.load offset=2 (local.get $w))))
            (local.set $s (f32x4.add
              (f32x4.add
                (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_low_i16x8_s (local.get $lo))) (v128.load offset=0 (local.get $xb)))
                (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_high_i16x8_s (local.get $lo))) (v128.load offset=16 (local.get $xb))))
              (f32x4.add
                (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_low_i16x8_s (local.get $hi))) (v128.load offset=32 (local.get $xb)))
                (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_high_i16x8_s (local.get $hi))) (v128.load offset=48 (local.get $xb))))))
            (local.set $lo (i16x8.extend_low_i8x16_s (v128.load offset=18 (local.get $w))))
            (local.set $hi (i16x8.extend_high_i8x16_s (v128.load offset=18 (local.get $w))))
            (local.set $s (f32x4.add (local.get $s) (f32x4.add
              (f32x4.add
                (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_low_i16x8_s (local.get $lo))) (v128.load offset=64 (local.get $xb)))
                (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_high_i16x8_s (local.get $lo))) (v128.load offset=80 (local.get $xb))))
              (f32x4.add
                (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_low_i16x8_s (local.get $hi))) (v128.load offset=96 (local.get $xb)))
                (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_high_i16x8_s (local.get $hi))) (v128.load offset=112 (local.get $xb)))))))
            (local.set $acc (f32x4.add (local.get $acc) (f32x4.mul
              (f32x4.splat (call $half (local.get $half) (local.get $w))) (local.get $s))))
            (local.set $w (i32.add (local.get $w) (i32.const 34)))
            (local.set $xb (i32.add (local.get $xb) (i32.const 128)))
            (local.set $b (i32.add (local.get $b) (i32.const 1)))
            (br $block)))
        (f32.store (i32.add (local.get $out) (i32.shl (local.get $r) (i32.const 2)))
          (call $hsum (local.get $acc)))
        (local.set $r (i32.add (local.get $r) (i32.const 1)))
        (br $row))))

  ;; OUT (n rows of `rows` floats) = X W^T for n rows of X (n rows of cols floats, at x): a
  ;; prompt's tokens at once. Each block's 32 codes are unpacked once, into eight f32x4
  ;; (c0..c7), and serve every row of X; each row's sums are formed exactly as matvec_q4_1
  ;; forms them (a four-lane accumulator over the blocks in order, kept at acc + 16 i, and the
  ;; m terms at macc + 4 i), so a row gets the same floats alone or in a batch.
  ;; xsum: room for n * cols / 32 floats; acc: 16 n bytes; macc: 4 n bytes.
  (func (export "matmul_q4_1") (param $w i32) (param $rows i32) (param $cols i32) (param $x i32)
                               (param $n i32) (param $xsum i32) (param $acc i32) (param $macc i32)
                               (param $half i32) (param $out i32)
    (local $nb i32) (local $r i32) (local $b i32) (local $i i32) (local $xb i32) (local $q v128)
    (local $mask v128) (local $lo v128) (local $hi v128) (local $s v128) (local $d v128) (local $m f32)
    (local $c0 v128) (local $c1 v128) (local $c2 v128) (local $c3 v128)
    (local $c4 v128) (local $c5 v128) (local $c6 v128) (local $c7 v128)
    (local $rowB i32) (local $xs i32) (local $a i32)
    (local.set $nb (i32.shr_u (local.get $cols) (i32.const 5)))
    (local.set $rowB (i32.shl (local.get $cols) (i32.const 2)))
    (local.set $i (i32.const 0))
    (block $sums_done
      (loop $sums
        (br_if $sums_done (i32.ge_u (local.get $i) (local.get $n)))
        (call $block_sums (i32.add (local.get $x) (i32.mul (local.get $i) (local.get $rowB))) (local.get $nb)
          (i32.add (local.get $xsum) (i32.shl (i32.mul (local.get $i) (local.get $nb)) (i32.const 2))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $sums)))
    (local.set $mask (i8x16.splat (i32.const 15)))
    (block $rows_done
      (loop $row
        (br_if $rows_done (i32.ge_u (local.get $r) (local.get $rows)))
        ;; the n accumulators = 0
        (local.set $i (i32.const 0))
        (block $z_done
          (loop $z
            (br_if $z_done (i32.ge_u (local.get $i) (local.get $n)))
            (v128.store (i32.add (local.get $acc) (i32.shl (local.get $i) (i32.const 4))) (v128.const f32x4 0 0 0 0))
            (f32.store (i32.add (local.get $macc) (i32.shl (local.get $i) (i32.const 2))) (f32.const 0))
            (local.set $i (i32.add (local.get $i) (i32.const 1)))
            (br $z)))
        (local.set $b (i32.const 0))
        (block $blocks_done
          (loop $block
            (br_if $blocks_done (i32.ge_u (local.get $b) (local.get $nb)))
            (local.set $q (v128.load offset=4 (local.get $w)))
            (local.set $lo (i16x8.extend_low_i8x16_u (v128.and (local.get $q) (local.get $mask))))
            (local.set $hi (i16x8.extend_high_i8x16_u (v128.and (local.get $q) (local.get $mask))))
            (local.set $c0 (f32x4.convert_i32x4_s (i32x4.extend_low_i16x8_u (local.get $lo))))
            (local.set $c1 (f32x4.convert_i32x4_s (i32x4.extend_high_i16x8_u (local.get $lo))))
            (local.set $c2 (f32x4.convert_i32x4_s (i32x4.extend_low_i16x8_u (local.get $hi))))
            (local.set $c3 (f32x4.convert_i32x4_s (i32x4.extend_high_i16x8_u (local.get $hi))))
            (local.set $lo (i16x8.extend_low_i8x16_u (i8x16.shr_u (local.get $q) (i32.const 4))))
            (local.set $hi (i16x8.extend_high_i8x16_u (i8x16.shr_u (local.get $q) (i32.const 4))))
            (local.set $c4 (f32x4.convert_i32x4_s (i32x4.extend_low_i16x8_u (local.get $lo))))
            (local.set $c5 (f32x4.convert_i32x4_s (i32x4.extend_high_i16x8_u (local.get $lo))))
            (local.set $c6 (f32x4.convert_i32x4_s (i32x4.extend_low_i16x8_u (local.get $hi))))
            (local.set $c7 (f32x4.convert_i32x4_s (i32x4.extend_high_i16x8_u (local.get $hi))))
            (local.set $d (f32x4.splat (call $half (local.get $half) (local.get $w))))
            (local.set $m (call $half (local.get $half) (i32.add (local.get $w) (i32.const 2))))
            ;; every row i of X: its block b at xb, its accumulators at a and macc + 4 i
            (local.set $xb (i32.add (local.get $x) (i32.shl (local.get $b) (i32.const 7))))
            (local.set $xs (i32.add (local.get $xsum) (i32.shl (local.get $b) (i32.const 2))))
            (local.set $a (local.get $acc))
            (local.set $i (i32.const 0))
            (block $x_done
              (loop $each_x
                (br_if $x_done (i32.ge_u (local.get $i) (local.get $n)))
                (local.set $s (f32x4.add
                  (f32x4.add
                    (f32x4.add (f32x4.mul (local.get $c0) (v128.load (local.get $xb)))
                               (f32x4.mul (local.get $c1) (v128.load offset=16 (local.get $xb))))
                    (f32x4.add (f32x4.mul (local.get $c2) (v128.load offset=32 (local.get $xb)))
                               (f32x4.mul (local.get $c3) (v128.load offset=48 (local.get $xb)))))
                  (f32x4.add
                    (f32x4.add (f32x4.mul (local.get $c4) (v128.load offset=64 (local.get $xb)))
                               (f32x4.mul (local.get $c5) (v128.load offset=80 (local.get $xb))))
                    (f32x4.add (f32x4.mul (local.get $c6) (v128.load offset=96 (local.get $xb)))
                               (f32x4.mul (local.get $c7) (v128.load offset=112 (local.get $xb)))))))
                (v128.store (local.get $a) (f32x4.add (v128.load (local.get $a)) (f32x4.mul (local.get $d) (local.get $s))))
                (f32.store (i32.add (local.get $macc) (i32.shl (local.get $i) (i32.const 2)))
                  (f32.add (f32.load (i32.add (local.get $macc) (i32.shl (local.get $i) (i32.const 2))))
                    (f32.mul (local.get $m) (f32.load (local.get $xs)))))
                (local.set $xb (i32.add (local.get $xb) (local.get $rowB)))
                (local.set $xs (i32.add (local.get $xs) (i32.shl (local.get $nb) (i32.const 2))))
                (local.set $a (i32.add (local.get $a) (i32.const 16)))
                (local.set $i (i32.add (local.get $i) (i32.const 1)))
                (br $each_x)))
            (local.set $w (i32.add (local.get $w) (i32.const 20)))
            (local.set $b (i32.add (local.get $b) (i32.const 1)))
            (br $block)))
        ;; out[i][r] = hsum(acc i) + macc i
        (local.set $i (i32.const 0))
        (block $o_done
          (loop $o
            (br_if $o_done (i32.ge_u (local.get $i) (local.get $n)))
            (f32.store (i32.add (local.get $out) (i32.shl (i32.add (i32.mul (local.get $i) (local.get $rows)) (local.get $r)) (i32.const 2)))
              (f32.add (call $hsum (v128.load (i32.add (local.get $acc) (i32.shl (local.get $i) (i32.const 4)))))
                (f32.load (i32.add (local.get $macc) (i32.shl (local.get $i) (i32.const 2))))))
            (local.set $i (i32.add (local.get $i) (i32.const 1)))
            (br $o)))
        (local.set $r (i32.add (local.get $r) (i32.const 1)))
        (br $row))))
)
