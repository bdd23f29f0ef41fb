/* SPDX-License-Identifier: MIT */
/* A PETSc client written here for the interposer's tests: the 2D Poisson equation on a DMDA
 * (5-point stencil, Dirichlet boundary), solved with CG and block Jacobi. PETSc's halo exchange
 * (PetscSF, MPI_Send_init/MPI_Startall) and its dot products and norms (MPI_Allreduce) are the
 * traffic pmr-run carries. Prints the iteration count and the residual norm to the last digit,
 * which must be the same with and without pmr-run. With -solves K it solves K times from the same
 * start (a time-stepping code's repeated solves): every solve but the last runs in the log stage
 * "Warm-up", the last in "Timed", so that -log_view separates the steady state from the
 * interposer's set-up (it carries a stream or a sum only after it has seen it repeat).
 *   mpirun -np N petsc_poisson [-n 200] [-solves 1] [PETSc options] */
#include <petscdmda.h>
#include <petscksp.h>

int main(int argc, char** argv) {
    PetscCall(PetscInitialize(&argc, &argv, NULL, NULL));
    PetscInt n = 200;
    PetscCall(PetscOptionsGetInt(NULL, NULL, "-n", &n, NULL));
    PetscInt solves = 1;
    PetscCall(PetscOptionsGetInt(NULL, NULL, "-solves", &solves, NULL));
    PetscCheck(solves >= 1, PETSC_COMM_WORLD, PETSC_ERR_ARG_OUTOFRANGE,
               "-solves %" PetscInt_FMT ": solve at least once", solves);
    DM da;
    PetscCall(DMDACreate2d(PETSC_COMM_WORLD, DM_BOUNDARY_NONE, DM_BOUNDARY_NONE, DMDA_STENCIL_STAR,
                           n, n, PETSC_DECIDE, PETSC_DECIDE, 1, 1, NULL, NULL, &da));
    PetscCall(DMSetFromOptions(da));
    PetscCall(DMSetUp(da));
    Mat A;
    PetscCall(DMCreateMatrix(da, &A));
    PetscInt xs, ys, xm, ym;
    PetscCall(DMDAGetCorners(da, &xs, &ys, NULL, &xm, &ym, NULL));
    const PetscReal h = 1.0 / (PetscReal)(n + 1);
    for (PetscInt j = ys; j < ys + ym; ++j) {
        for (PetscInt i = xs; i < xs + xm; ++i) {
            MatStencil row = {.i = i, .j = j}, col[5];
            PetscScalar v[5];
            PetscInt k = 0;
            const PetscInt di[4] = {-1, 1, 0, 0}, dj[4] = {0, 0, -1, 1};
            for (PetscInt d = 0; d < 4; ++d) {
                const PetscInt ii = i + di[d], jj = j + dj[d];
                if (ii >= 0 && ii < n && jj >= 0 && jj < n) {
                    col[k].i = ii;
                    col[k].j = jj;
                    v[k++] = -1.0;
                }
            }
            col[k].i = i;
            col[k].j = j;
            v[k++] = 4.0;
            PetscCall(MatSetValuesStencil(A, 1, &row, k, col, v, INSERT_VALUES));
        }
    }
    PetscCall(MatAssemblyBegin(A, MAT_FINAL_ASSEMBLY));
    PetscCall(MatAssemblyEnd(A, MAT_FINAL_ASSEMBLY));
    Vec x, b;
    PetscCall(DMCreateGlobalVector(da, &x));
    PetscCall(VecDuplicate(x, &b));
    /* A right-hand side that depends on the position only (the same for every decomposition). */
    PetscScalar** bb;
    PetscCall(DMDAVecGetArray(da, b, &bb));
    for (PetscInt j = ys; j < ys + ym; ++j) {
        for (PetscInt i = xs; i < xs + xm; ++i) {
            const PetscReal px = (i + 1) * h, py = (j + 1) * h;
            bb[j][i] = h * h * (1.0 + px * (1.0 - py) + 3.0 * py * py);
        }
    }
    PetscCall(DMDAVecRestoreArray(da, b, &bb));
    KSP ksp;
    PetscCall(KSPCreate(PETSC_COMM_WORLD, &ksp));
    PetscCall(KSPSetOperators(ksp, A, A));
    PetscCall(KSPSetType(ksp, KSPCG));
    PC pc;
    PetscCall(KSPGetPC(ksp, &pc));
    PetscCall(PCSetType(pc, PCJACOBI));
    PetscCall(KSPSetTolerances(ksp, 1e-10, PETSC_DEFAULT, PETSC_DEFAULT, 100000));
    PetscCall(KSPSetFromOptions(ksp));
    PetscLogStage warmup, timed;
    PetscCall(PetscLogStageRegister("Warm-up", &warmup));
    PetscCall(PetscLogStageRegister("Timed", &timed));
    PetscLogDouble t0 = 0, t1 = 0, first = 0;
    for (PetscInt k = 0; k < solves; ++k) {
        const PetscBool last = k + 1 == solves ? PETSC_TRUE : PETSC_FALSE;
        PetscCall(PetscLogStagePush(last ? timed : warmup));
        PetscCall(VecZeroEntries(x));
        PetscCall(PetscTime(&t0));
        PetscCall(KSPSolve(ksp, b, x));
        PetscCall(PetscTime(&t1));
        PetscCall(PetscLogStagePop());
        if (k == 0) {
            first = t1 - t0;
        }
    }
    PetscInt iterations;
    PetscReal residual;
    PetscCall(KSPGetIterationNumber(ksp, &iterations));
    PetscCall(KSPGetResidualNorm(ksp, &residual));
    PetscReal norm;
    PetscCall(VecNorm(x, NORM_2, &norm));
    PetscCall(PetscPrintf(PETSC_COMM_WORLD,
                          "iterations %" PetscInt_FMT " residual %.17g solution norm %.17g\n",
                          iterations, (double)residual, (double)norm));
    PetscCall(PetscPrintf(PETSC_COMM_WORLD,
                          "solve time %.6f s (first of %" PetscInt_FMT ": %.6f s)\n",
                          (double)(t1 - t0), solves, (double)first));
    PetscCall(KSPDestroy(&ksp));
    PetscCall(VecDestroy(&x));
    PetscCall(VecDestroy(&b));
    PetscCall(MatDestroy(&A));
    PetscCall(DMDestroy(&da));
    PetscCall(PetscFinalize());
    return 0;
}
